//===- driver.cpp - runMain: the train program's top level ---------------===//
//
// Parses options, loads data, builds the Session, then either runs the
// gradient check or the training loop (per-epoch evaluation, metrics file,
// checkpoint). Every error becomes "train: error: ..." and a non-zero exit.
//
//===----------------------------------------------------------------------===//
#include "dtc/runtime.h"

#include "checkpoint.h"
#include "error.h"
#include "gradcheck.h"
#include "params.h"
#include "progress.h"
#include "session.h"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

extern "C" void openblas_set_num_threads(int);

namespace dtc::rt {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// --metrics FILE: one CSV row per training step.
class MetricsFile {
public:
  MetricsFile(const std::string &path, const ModelSpec &spec) : path_(path) {
    if (path.empty())
      return;
    f_ = std::fopen(path.c_str(), "w");
    if (!f_)
      throw Error(fmt::format("cannot open metrics file '{}': {}", path, std::strerror(errno)));
    fmt::print(f_, "epoch,step,batch");
    for (int32_t i = 0; i < spec.numOutputs; ++i)
      fmt::print(f_, ",{}", spec.outputNames[i]);
    fmt::print(f_, ",lr,seconds\n");
  }
  ~MetricsFile() {
    if (f_)
      std::fclose(f_);
  }
  MetricsFile(const MetricsFile &) = delete;
  MetricsFile &operator=(const MetricsFile &) = delete;

  void row(int64_t epoch, int64_t step, int64_t batch, const std::vector<float> &outputs,
           float lr, double seconds) {
    if (!f_)
      return;
    fmt::print(f_, "{},{},{}", epoch, step, batch);
    for (float v : outputs)
      fmt::print(f_, ",{:.6g}", v);
    fmt::print(f_, ",{:.6g},{:.3f}\n", lr, seconds);
  }

  void flush() {
    if (f_ && (std::fflush(f_) != 0 || std::ferror(f_)))
      throw Error(fmt::format("cannot write metrics file '{}': {}", path_, std::strerror(errno)));
  }

private:
  std::string path_;
  std::FILE *f_ = nullptr;
};

void printHeader(const Session &s) {
  const Options &o = s.opts;
  fmt::print("model {} params {} batch {} epochs {} optimizer {} data {} ({} train, {} test "
             "samples)\n",
             s.spec.name, countParams(s.spec), o.batch, o.epochs,
             optimizerDescription(s.spec, o.lr), o.data.describe(), s.data.train.size,
             s.data.test.size);
  std::fflush(stdout);
}

void train(Session &s) {
  const ModelSpec &spec = s.spec;
  const Options &o = s.opts;
  const Dataset &trainSet = s.data.train;
  Sampler sampler(trainSet.size, o.batch, o.seed, o.shuffle);
  Progress progress(o.quiet ? ProgressMode::Off : o.progress, o.epochs);
  MetricsFile metrics(o.metricsPath, spec);
  const bool evaluate = o.eval && s.data.test.size > 0;
  const auto start = Clock::now();
  int64_t step = 0;
  bool stop = false;

  if (o.epochs == 0 && evaluate) { // --epochs 0: evaluate the parameters only
    std::vector<double> results = s.evaluate(s.data.test);
    std::string line = "eval";
    for (int32_t i = 0; i < spec.numOutputs; ++i)
      line += fmt::format(" test_{} {:.4f}", spec.outputNames[i], results[size_t(i)]);
    fmt::print("{}\n", line);
    std::fflush(stdout);
  }

  for (int64_t epoch = 1; epoch <= o.epochs && !stop; ++epoch) {
    const auto epochStart = Clock::now();
    sampler.setEpoch(epoch);
    progress.beginEpoch(epoch, sampler.numBatches());
    double lossSum = 0;
    int64_t seen = 0;
    for (int64_t b = 0; b < sampler.numBatches() && !stop; ++b) {
      int64_t n;
      const int64_t *idx = sampler.batch(b, &n);
      s.loadBatch(trainSet, idx, n);
      s.hyper.step = ++step;
      spec.trainStep(s.args);
      const float loss = s.outputs[0];
      if (!std::isfinite(loss))
        throw Error(fmt::format("the loss became {} at epoch {} step {}; try a lower "
                                "learning rate (--lr)",
                                loss, epoch, step));
      lossSum += double(loss) * double(n);
      seen += n;
      metrics.row(epoch, step, n, s.outputs, s.hyper.lr, secondsSince(start));
      progress.update(b + 1, lossSum / double(seen), double(seen) / secondsSince(epochStart));
      stop = o.maxSteps > 0 && step >= o.maxSteps;
    }
    const double trainSeconds = secondsSince(epochStart);
    progress.endEpoch();
    metrics.flush();

    std::string line = fmt::format("epoch {}/{} train_loss {:.4f}", epoch, o.epochs,
                                   lossSum / double(std::max<int64_t>(seen, 1)));
    if (evaluate) {
      std::vector<double> results = s.evaluate(s.data.test);
      for (int32_t i = 0; i < spec.numOutputs; ++i)
        line += fmt::format(" test_{} {:.4f}", spec.outputNames[i], results[size_t(i)]);
    }
    line += fmt::format(" images/s {:.0f} time {:.2f}s", double(seen) / trainSeconds,
                        secondsSince(epochStart));
    fmt::print("{}\n", line);
    std::fflush(stdout);
  }

  if (!o.savePath.empty()) {
    saveCheckpoint(o.savePath, spec, s.persistent.data());
    if (!o.quiet)
      fmt::print("saved parameters to {}\n", o.savePath);
  }
}

void reportError(const char *what) {
  std::fflush(stdout);
  fmt::print(stderr, "train: error: {}\n", what);
}

} // namespace

int runMain(int argc, char **argv, const ModelSpec &spec) {
  try {
    validateSpec(spec);
    Options opts;
    if (std::optional<int> exitCode = parseOptions(argc, argv, spec, opts))
      return *exitCode;
    openblas_set_num_threads(opts.threads);
    Session session(spec, opts, loadData(opts.data, spec));
    if (!opts.quiet)
      printHeader(session);
    if (opts.gradcheck)
      return runGradcheck(session) ? 0 : 1;
    train(session);
    return 0;
  } catch (const std::bad_alloc &) {
    reportError("out of memory");
  } catch (const std::exception &e) {
    reportError(e.what());
  } catch (...) {
    reportError("unknown exception");
  }
  return 1;
}

} // namespace dtc::rt
