//===- driver.cpp - runMain: the train program's top level ---------------===//
//
// Parses options, creates the communicator, checks that every rank runs the
// same program with the same options and data, loads data, reads --resume,
// builds the Session, then either runs the gradient check or assembles the
// training loop (training_loop.h) with the sinks the options ask for
// (sinks.h: console, --metrics, --trace, --checkpoint) and writes --save.
// Every error becomes "train: error: ..." and a non-zero exit; with several
// ranks, an error on one rank ends its process at once (_exit), which makes
// the launcher end the others, so that no rank is left waiting for it.
//
//===----------------------------------------------------------------------===//
#include "dtc/runtime.h"

#include "checkpoint/checkpoint.h"
#include "comm/comm_impl.h"
#include "support/error.h"
#include "train/calibrate.h"
#include "train/executor.h"
#include "support/files.h"
#include "kernels/gemm/engine.h"
#include "checkpoint/shards.h"
#include "train/gradcheck.h"
#include "kernels/parallel.h"
#include "checkpoint/params.h"
#include "train/predict.h"
#include "train/sample.h"
#include "train/preempt.h"
#include "train/session.h"
#include "train/sinks.h"
#include "support/tracer.h"
#include "support/resident.h"
#include "train/training_loop.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <sched.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace dtc::rt {
namespace {

// Programs with CUDA steps also say where they run ("device cuda:0 (...)",
// "device cpu (no CUDA device found (cudaGetDeviceCount: ...))").
void printHeader(const Session &s, const Executor &exec, const DeviceChoice &device) {
  const Options &o = s.opts;
  std::string where;
  if (hasCudaSteps(s.spec) || device.cuda)
    where = fmt::format(" device {}{}", exec.describe(),
                        device.note.empty() ? "" : " (" + device.note + ")");
  const std::string validation =
      s.data.validation.size > 0 ? fmt::format("{} validation, ", s.data.validation.size) : "";
  const std::string schedule = describeSchedule(o.schedule);
  // A text's samples are windows of tokens (and it has no test split).
  const std::string sizes =
      s.data.train.isText()
          ? fmt::format("{} train, {}windows of {} tokens", s.data.train.size, validation,
                        s.data.train.text.window)
          : fmt::format("{} train, {}{} test samples", s.data.train.size, validation,
                        s.data.test.size);
  fmt::print("model {} params {} batch {}{} epochs {} optimizer {}{} data {} ({}) ranks {} "
             "backend {}{}\n",
             s.spec.name, countParams(s.spec), o.batch,
             o.accumulate > 1 ? fmt::format(" accumulate {}", o.accumulate) : "", o.epochs,
             optimizerDescription(s.spec, o.lr), schedule.empty() ? "" : " schedule " + schedule,
             o.data.describe(), sizes, s.comm.size(), s.comm.backend(), where);
  // What a rank allocates for the model (dtc --report prints the same).
  // (On the device for CUDA steps.)
  const int64_t arena = arenaBytes(s.spec, o.batch, o.gradcheck);
  fmt::print("memory per rank: persistent {} + arena {} (batch {}) = {} bytes{}\n",
             s.spec.persistentBytes, arena, o.batch, s.spec.persistentBytes + arena,
             s.spec.shardStage > 0 ? fmt::format(" (stage {} sharded over {} ranks)",
                                                 s.spec.shardStage, s.spec.shardRanks)
                                   : std::string());
  std::fflush(stdout);
}

//===--- startup checks: every rank runs the same program, options, data ---===//

// What must be equal on every rank, with a fixed layout (allgathered).
struct RunIdentity {
  uint64_t magic;   // layout version of this struct
  uint64_t program; // ModelSpec::fingerprint
  int64_t batch, epochs, maxSteps;
  uint64_t seed;
  uint32_t lrBits;
  int32_t shuffle, eval, metrics;
  int32_t dataKind, cuda; // no padding: compared with memcmp
  int64_t syntheticTrain, syntheticTest;
  int64_t logInterval; // steps between output reads (collectives with --metrics)
  int64_t accumulate;  // micro-batches per optimizer step
  int64_t evalEvery;   // evaluations between steps (collectives)
};
static_assert(sizeof(RunIdentity) == 8 * 6 + 4 * 6 + 8 * 5, "RunIdentity has padding");
constexpr uint64_t kRunIdentityMagic = 0x64746372756e3033ULL; // "dtcrun03"

RunIdentity runIdentity(const ModelSpec &spec, const Options &o, bool cuda) {
  RunIdentity id;
  std::memset(&id, 0, sizeof id);
  id.magic = kRunIdentityMagic;
  id.program = spec.fingerprint;
  id.batch = o.batch;
  id.accumulate = o.accumulate;
  id.evalEvery = o.evalEvery;
  id.epochs = o.epochs;
  id.maxSteps = o.maxSteps;
  id.seed = o.seed;
  std::memcpy(&id.lrBits, &o.lr, sizeof id.lrBits);
  id.shuffle = o.shuffle;
  id.eval = o.eval;
  id.metrics = !o.metricsPath.empty();
  id.dataKind = int32_t(o.data.kind);
  id.cuda = cuda;
  id.logInterval = cuda ? o.logInterval : 1;
  if (o.data.kind == DatasetKind::Synthetic) {
    id.syntheticTrain = o.data.trainSize;
    id.syntheticTest = o.data.testSize;
  }
  return id;
}

// The options in which two identities differ, e.g. "--batch 16 vs 8".
std::string optionDifferences(const RunIdentity &a, const RunIdentity &b) {
  std::vector<std::string> d;
  auto onOff = [](int32_t v) { return v ? "on" : "off"; };
  if (a.batch != b.batch)
    d.push_back(fmt::format("--batch {} vs {}", a.batch, b.batch));
  if (a.evalEvery != b.evalEvery)
    d.push_back(fmt::format("--eval-every {} vs {}", a.evalEvery, b.evalEvery));
  if (a.accumulate != b.accumulate)
    d.push_back(fmt::format("--accumulate {} vs {}", a.accumulate, b.accumulate));
  if (a.epochs != b.epochs)
    d.push_back(fmt::format("--epochs {} vs {}", a.epochs, b.epochs));
  if (a.maxSteps != b.maxSteps)
    d.push_back(fmt::format("--max-steps {} vs {}", a.maxSteps, b.maxSteps));
  if (a.seed != b.seed)
    d.push_back(fmt::format("--seed {} vs {}", a.seed, b.seed));
  if (a.lrBits != b.lrBits) {
    float x, y;
    std::memcpy(&x, &a.lrBits, sizeof x);
    std::memcpy(&y, &b.lrBits, sizeof y);
    d.push_back(fmt::format("--lr {:g} vs {:g}", x, y));
  }
  if (a.shuffle != b.shuffle)
    d.push_back(fmt::format("--shuffle {} vs {}", onOff(a.shuffle), onOff(b.shuffle)));
  if (a.eval != b.eval)
    d.push_back(fmt::format("--eval {} vs {}", onOff(a.eval), onOff(b.eval)));
  if (a.metrics != b.metrics)
    d.push_back(fmt::format("--metrics {} vs {}", a.metrics ? "given" : "not given",
                            b.metrics ? "given" : "not given"));
  if (a.cuda != b.cuda)
    d.push_back(fmt::format("--device {} vs {}", a.cuda ? "cuda" : "cpu", b.cuda ? "cuda" : "cpu"));
  if (a.logInterval != b.logInterval)
    d.push_back(fmt::format("--log-interval {} vs {}", a.logInterval, b.logInterval));
  if (a.dataKind != b.dataKind || a.syntheticTrain != b.syntheticTrain ||
      a.syntheticTest != b.syntheticTest)
    d.push_back("--data");
  return fmt::format("{}", fmt::join(d, ", "));
}

std::string rankList(const std::vector<int> &ranks) {
  return fmt::format("{}", fmt::join(ranks, ", "));
}

// Right after the communicator exists: refuses (on every rank, collectively)
// to train unless every rank runs the same compiled program with the same
// options.
void checkSameRun(Communicator &comm, const ModelSpec &spec, const Options &o, bool cuda) {
  if (comm.size() == 1)
    return;
  const RunIdentity mine = runIdentity(spec, o, cuda);
  std::vector<RunIdentity> all(static_cast<size_t>(comm.size()));
  comm.allgather(&mine, all.data(), sizeof(RunIdentity));
  const RunIdentity &ref = all[0];
  std::vector<int> differ;
  for (int r = 1; r < comm.size(); ++r)
    if (std::memcmp(&all[size_t(r)], &ref, sizeof ref) != 0)
      differ.push_back(r);
  if (differ.empty())
    return;
  const int r = differ[0];
  const RunIdentity &other = all[size_t(r)];
  const std::string more =
      differ.size() > 1 ? fmt::format(" (ranks {} differ from rank 0)", rankList(differ)) : "";
  const char *fix = "start the same train with the same options on every rank";
  if (other.magic != ref.magic)
    throw CollectiveError(fmt::format("rank {} runs a different dtc runtime than rank 0{}; {}", r,
                                      more, fix));
  if (other.program != ref.program)
    throw CollectiveError(fmt::format("rank {} runs a different compiled program (fingerprint "
                                      "{:016x}) than rank 0 ({:016x}){}; {}",
                                      r, other.program, ref.program, more, fix));
  throw CollectiveError(fmt::format("rank {} runs with different options than rank 0 ({}){}; {}",
                                    r, optionDifferences(other, ref), more, fix));
}

struct DataIdentity {
  int64_t trainSize, testSize;
  uint64_t trainDigest, testDigest;
};

// After loading: every rank must hold the same data sets.
void checkSameData(Communicator &comm, const DataSplits &data) {
  if (comm.size() == 1)
    return;
  const DataIdentity mine{data.train.size, data.test.size, datasetDigest(data.train),
                          datasetDigest(data.test)};
  std::vector<DataIdentity> all(static_cast<size_t>(comm.size()));
  comm.allgather(&mine, all.data(), sizeof(DataIdentity));
  std::vector<int> differ;
  for (int r = 1; r < comm.size(); ++r)
    if (std::memcmp(&all[size_t(r)], &all[0], sizeof mine) != 0)
      differ.push_back(r);
  if (differ.empty())
    return;
  const DataIdentity &a = all[size_t(differ[0])], &b = all[0];
  auto describe = [](int64_t size, uint64_t digest) {
    return fmt::format("{} samples, digest {:016x}", size, digest);
  };
  std::string what = a.trainSize != b.trainSize || a.trainDigest != b.trainDigest
                         ? fmt::format("training set: {} vs {}", describe(a.trainSize, a.trainDigest),
                                       describe(b.trainSize, b.trainDigest))
                         : fmt::format("test set: {} vs {}", describe(a.testSize, a.testDigest),
                                       describe(b.testSize, b.testDigest));
  throw CollectiveError(fmt::format(
      "rank {} loaded different data than rank 0 ({}){}; give every rank the same data",
      differ[0], what,
      differ.size() > 1 ? fmt::format(" (ranks {} differ from rank 0)", rankList(differ)) : ""));
}

//===--- checkpoints, resume, preemption ------------------------------------===//

// Runs fn on every rank; if it throws an Error on any, every rank throws a
// CollectiveError (the failing ones with their own message), so that the
// ranks end together instead of waiting for each other.
template <class Fn> void onEveryRank(CommBase &comm, const char *what, Fn fn) {
  std::string error;
  try {
    fn();
  } catch (const Error &e) {
    error = e.what();
  }
  if (comm.size() == 1) {
    if (!error.empty())
      throw Error(error);
    return;
  }
  double failed = error.empty() ? 0 : 1;
  comm.allreduceSum(&failed, 1);
  if (failed == 0)
    return;
  throw CollectiveError(error.empty() ? fmt::format("another rank failed {}", what) : error);
}

// Reads, checks and distributes the training state of --resume (collective):
// every rank gets its metadata and takes the options the checkpoint
// recorded unless given on the command line; rank 0 gets the persistent
// block (Session broadcasts it). Returns nothing for a fresh start (--resume
// auto without a checkpoint file).
std::optional<LoadedTrainingState> loadResume(CommBase &comm, const ModelSpec &spec,
                                              Options &o, const DataSplits &data) {
  if (o.resumePath.empty())
    return std::nullopt;
  const bool autoResume = o.resumePath == "auto";
  const std::string path = autoResume ? o.checkpointPath : o.resumePath;
  LoadedTrainingState loaded;
  std::string error, encoded;
  int64_t present = 1;
  if (comm.rank() == 0) {
    try {
      if (autoResume && ::access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
        present = 0;
      } else {
        loaded = loadTrainingState(path, spec);
        const TrainingState &st = loaded.state;
        const uint64_t digest = datasetDigest(data.train);
        if (st.trainSamples != data.train.size || st.trainDigest != digest)
          throw Error(fmt::format(
              "checkpoint '{}' was trained on other data ({}: {} samples, digest {:016x}); "
              "this run's training set has {} samples, digest {:016x}",
              path, st.data, st.trainSamples, st.trainDigest, data.train.size, digest));
        encoded = encodeTrainingState(st);
      }
    } catch (const Error &e) {
      error = e.what();
    }
  }
  broadcastString(comm, error);
  if (!error.empty())
    throw CollectiveError(error);
  if (comm.size() > 1)
    comm.broadcast(&present, sizeof present, 0);
  if (!present) {
    if (comm.rank() == 0 && !o.quiet)
      fmt::print("no checkpoint at {} yet: starting afresh\n", path);
    return std::nullopt;
  }
  broadcastString(comm, encoded);
  loaded.state = decodeTrainingState(encoded);
  const TrainingState &st = loaded.state;
  // The options that make the position inside the epoch meaningful.
  auto refuse = [&](const char *option, const std::string &mine, const std::string &theirs) {
    throw CollectiveError(fmt::format(
        "{} {} differs from the checkpoint's {} ('{}'): a resumed run continues the epoch "
        "order the checkpoint recorded; drop {}, or start afresh from its parameters with "
        "--init",
        option, mine, theirs, path, option));
  };
  if (o.isGiven("--seed") && o.seed != st.seed)
    refuse("--seed", std::to_string(o.seed), std::to_string(st.seed));
  if (o.isGiven("--shuffle") && o.shuffle != st.shuffle)
    refuse("--shuffle", o.shuffle ? "on" : "off", st.shuffle ? "on" : "off");
  o.seed = st.seed;
  o.shuffle = st.shuffle;
  if (!o.isGiven("--batch"))
    o.batch = st.batch;
  if (!o.isGiven("--accumulate")) {
    if (st.accumulate > 1 && !spec.accumulateStep)
      throw CollectiveError(fmt::format(
          "the run in '{}' accumulates {} micro-batches per step, but model '{}' was compiled "
          "without gradient accumulation; give --accumulate 1 to continue without",
          path, st.accumulate, spec.name));
    o.accumulate = st.accumulate;
  }
  if (!o.isGiven("--lr"))
    o.lr = st.lr;
  // The schedule continues as it was unless one of its options is given.
  if (!o.isGiven("--lr-schedule") && !o.isGiven("--warmup-steps") &&
      !o.isGiven("--decay-steps") && !o.isGiven("--min-lr") && !o.isGiven("--lr-step-size") &&
      !o.isGiven("--lr-gamma"))
    o.schedule = st.schedule;
  if (!o.isGiven("--epochs"))
    o.epochs = st.epochs;
  // --max-steps is where this invocation stops, not part of the run: a run
  // stopped by it continues to its --epochs unless given again.
  o.resumeActive = true;
  if (comm.rank() == 0 && !o.quiet) {
    fmt::print("resuming from {}: step {}, epoch {}, {} of {} samples of it done\n", path,
               st.step, st.epoch, st.epochSamples, st.trainSamples);
    const int64_t before = st.ranks * st.batch * st.accumulate,
                  now = int64_t(comm.size()) * o.batch * o.accumulate;
    auto times = [](int64_t k) { return k > 1 ? fmt::format(" x {}", k) : std::string(); };
    if (before != now)
      fmt::print("note: the global batch changes from {} ({} rank{} x {}{}) to {} ({} x {}{})\n",
                 before, st.ranks, st.ranks == 1 ? "" : "s", st.batch, times(st.accumulate),
                 now, comm.size(), o.batch, times(o.accumulate));
    std::fflush(stdout);
  }
  return loaded;
}

//===--- training -----------------------------------------------------------===//

// The training loop with the sinks the options ask for (sinks.h gives
// their order), then --save. Returns the exit status: 0, or kExitPreempted.
// train --predict (predict.h): one process, the CPU steps, the parameters of
// --init, the inputs in file order.
int predict(const ModelSpec &spec, const Options &opts, CommBase &comm) {
  if (comm.size() > 1)
    throw CollectiveError(fmt::format("--predict runs in one process, but {} ranks were "
                                      "started; run it without a launcher",
                                      comm.size()));
  checkWritable(opts.outputPath, "the predictions", "--output");
  DataSplits data;
  data.train = readPredictInputs(opts.predictPath, spec);
  const int64_t samples = data.train.size;
  checkStepMemory(spec, opts.batch, /*hostSteps=*/true);
  Session session(spec, opts, std::move(data), comm, /*hostSteps=*/true, nullptr);
  std::unique_ptr<Executor> exec = makeCpuExecutor(session);
  runPredict(session, *exec, opts.outputPath);
  if (!opts.quiet)
    fmt::print("wrote the predictions of {} samples of {} to {}\n", samples, opts.predictPath,
               opts.outputPath);
  return 0;
}

// train --sample (sample.h): one process, the CPU steps, the parameters of
// --init; no data is read.
int sample(const ModelSpec &spec, const Options &opts, CommBase &comm) {
  if (comm.size() > 1)
    throw CollectiveError(fmt::format("--sample runs in one process, but {} ranks were "
                                      "started; run it without a launcher",
                                      comm.size()));
  checkSampleModel(spec, opts.prompt);
  if (!opts.outputPath.empty())
    checkWritable(opts.outputPath, "the sample", "--output");
  checkStepMemory(spec, opts.batch, /*hostSteps=*/true);
  // The session's data: one empty window, the shape of the windows
  // runSample stages.
  DataSplits data;
  Dataset &like = data.train;
  like.source = "--prompt";
  like.features = spec.inputNumel;
  like.labelKind = LabelKind::Class;
  like.labelWidth = spec.inputNumel;
  like.text.window = spec.inputNumel;
  Session session(spec, opts, std::move(data), comm, /*hostSteps=*/true, nullptr);
  std::unique_ptr<Executor> exec = makeCpuExecutor(session);
  // The text goes out as it is made: N may be more than memory holds.
  if (opts.outputPath.empty()) {
    runSample(session, *exec, [](std::string_view bytes) {
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
      std::fflush(stdout);
      if (std::ferror(stdout))
        throw Error("--sample: could not write to standard output");
    });
    return 0;
  }
  AtomicFile out(opts.outputPath, "the sample");
  std::string pending;
  runSample(session, *exec, [&](std::string_view bytes) {
    pending.append(bytes);
    if (pending.size() >= (size_t(1) << 16)) {
      out.write(pending);
      pending.clear();
    }
  });
  out.write(pending);
  out.commit();
  if (!opts.quiet)
    fmt::print("wrote {} tokens after the prompt to {}\n", opts.sampleTokens, opts.outputPath);
  return 0;
}

// The bytes the data set holds in memory once every sample has been read
// (the validation split is the training set's end; a text's splits share
// its bytes).
int64_t dataSetBytes(const DataSplits &d) {
  int64_t bytes = d.train.text.bytes ? int64_t(d.train.text.bytes->size()) : 0;
  for (const Dataset *s : {&d.train, &d.test})
    if (!s->isText())
      bytes += s->size * s->features * 4 + int64_t(s->yClass.size()) * 4 +
               int64_t(s->yValue.size()) * 4;
  return bytes;
}

// Bytes of memory this process may still take: /proc/meminfo's
// MemAvailable, and within a cgroup (v2) its memory.max less its use; 0
// when unknown.
int64_t availableBytes() {
  int64_t available = 0;
  if (std::FILE *f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "MemAvailable:", 13) == 0)
        available = std::strtoll(line + 13, nullptr, 10) * 1024;
    std::fclose(f);
  }
  auto readNumber = [](const char *path) -> int64_t {
    std::FILE *f = std::fopen(path, "r");
    if (!f)
      return -1;
    char text[64] = {0};
    const bool ok = std::fgets(text, sizeof text, f) != nullptr;
    std::fclose(f);
    return ok && text[0] >= '0' && text[0] <= '9' ? std::strtoll(text, nullptr, 10) : -1;
  };
  const int64_t limit = readNumber("/sys/fs/cgroup/memory.max"),
                used = readNumber("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used >= 0)
    available = available > 0 ? std::min(available, limit - used) : limit - used;
  return std::max<int64_t>(0, available);
}

// Before training (rank 0 says it): whether the run matches what dtc
// planned the program for (ModelSpec::prediction): its world size, and the
// memory a rank will need (the prediction at this batch, with the data set)
// against the budget it was planned under and what the node has free for
// its ranks.
void checkPlan(const ModelSpec &spec, const Options &o, const CommBase &comm,
               int64_t dataBytes) {
  const ModelSpec::Prediction &p = spec.prediction;
  if (p.stepSeconds <= 0 || comm.rank() != 0 || o.quiet)
    return;
  auto mib = [](double bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); };
  if (p.ranks != comm.size() && spec.shardStage == 0) // (a sharded one refuses to start)
    fmt::print(stderr,
               "train: note: dtc planned this program for {} rank{}, and it runs on {}: its "
               "prediction is for {} (dtc --ranks {} plans for {})\n",
               p.ranks, p.ranks == 1 ? "" : "s", comm.size(), p.ranks, comm.size(),
               comm.size());
  const int64_t need = p.peakBytes - arenaBytes(spec, p.batch) + arenaBytes(spec, o.batch) +
                       dataBytes;
  if (p.budget > 0 && need > p.budget)
    fmt::print(stderr,
               "train: note: a rank needs {} (predicted, with the data set's {}), more than "
               "the {} it was planned for (dtc --memory-per-rank)\n",
               mib(double(need)), mib(double(dataBytes)), mib(double(p.budget)));
  const int64_t available = availableBytes();
  if (available > 0 && need * comm.localSize() > available)
    fmt::print(stderr,
               "train: warning: {} rank{} on this node need {} each (predicted, with the data "
               "set), and the node has {} available\n",
               comm.localSize(), comm.localSize() == 1 ? "" : "s", mib(double(need)),
               mib(double(available)));
  std::fflush(stderr);
}

// dataBytes: what the data set holds; hostSteps: the steps run on the host's
// cores (PredictionSink).
int train(Session &s, Executor &exec, const RunStart &begin, int64_t dataBytes, bool hostSteps) {
  const Options &o = s.opts;
  const bool root = s.comm.rank() == 0;
  std::optional<TraceSink> trace;
  std::optional<CheckpointSink> checkpoint;
  std::optional<MetricsSink> metrics;
  std::optional<ConsoleSink> console;
  std::optional<PredictionSink> prediction;
  std::vector<TrainingSink *> sinks;
  if (!o.tracePath.empty()) // every rank its own
    sinks.push_back(&trace.emplace(o.tracePath, o.traceSteps, root && !o.quiet, exec, s.comm));
  // (Sharded: every rank, whose shards of the state rank 0 gathers.)
  if ((root || s.spec.shardStage > 0) && !o.checkpointPath.empty())
    sinks.push_back(&checkpoint.emplace(s, exec));
  if (root && !o.metricsPath.empty())
    sinks.push_back(&metrics.emplace(o.metricsPath, s.spec));
  if (root)
    sinks.push_back(&console.emplace(s.spec, o, s.comm.size()));
  sinks.push_back(&prediction.emplace(s.spec, o, s.comm, dataBytes, hostSteps)); // (every rank)
  TrainingLoop loop(s, exec, loopConfig(o), std::move(sinks));
  const bool preempted = loop.run(begin).preempted();
  s.finishCarried(); // (the steps' last all-gathers)
  if (preempted)
    return kExitPreempted;
  // (Stage 3: every rank's shards of the parameters gathered.)
  std::vector<char> image;
  if (!o.savePath.empty() && s.spec.shardStage == 3) {
    exec.persistentToHost();
    image = gatherParamImage(s.spec, s.comm, s.persistent.data());
  }
  if (!o.savePath.empty() && root) {
    exec.persistentToHost();
    saveCheckpoint(o.savePath, s.spec, s.persistent.data(),
                   image.empty() ? nullptr : image.data());
    if (!o.quiet)
      fmt::print("saved parameters to {}\n", o.savePath);
  }
  return 0;
}

// The files the run reads, which no output may replace (files.h): --init,
// --resume (which its --checkpoint continues), --predict's input and the
// data set's files.
void addRunInputs(const Options &o) {
  forgetRunInputs();
  addRunInput("--init", o.initPath);
  if (!o.resumePath.empty())
    addRunInput("--resume", o.resumePath == "auto" ? o.checkpointPath : o.resumePath,
                "--checkpoint");
  addRunInput("--predict", o.predictPath);
  if (!o.predictPath.empty() || o.sampleTokens > 0)
    return; // no data set is read
  const DataSource &d = o.data;
  switch (d.kind) {
  case DatasetKind::IDX:
    for (const char *name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
      addRunInput("--data", idxFile(d.dir, name));
    break;
  case DatasetKind::CSV:
  case DatasetKind::Text:
    addRunInput("--data", d.trainPath);
    addRunInput("--data", d.testPath);
    break;
  case DatasetKind::Synthetic:
  case DatasetKind::None:
    break;
  }
}

// Before any work: every file the run will write can be created, and none
// is one of its inputs (rank 0 writes --save, --checkpoint and --metrics;
// every rank its --trace).
void checkOutputs(CommBase &comm, const Options &o) {
  onEveryRank(comm, "to check its output files", [&] {
    addRunInputs(o);
    if (!o.tracePath.empty())
      checkWritable(Tracer::rankPath(o.tracePath, comm.rank()), "trace file", "--trace");
    if (comm.rank() != 0)
      return;
    if (!o.savePath.empty())
      checkWritable(o.savePath, "parameters file", "--save");
    if (!o.checkpointPath.empty())
      checkWritable(o.checkpointPath, "checkpoint", "--checkpoint");
    if (!o.metricsPath.empty())
      checkWritable(o.metricsPath, "metrics file", "--metrics");
  });
}

// BLAS threads without --threads: the cores this process may run on when
// the launcher bound it to some (mpirun binds each of 2 ranks to a core),
// else the machine's cores shared by the ranks on this node.
int defaultThreads(const CommBase &comm) {
  const int hw = std::max(1, int(std::thread::hardware_concurrency()));
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < hw)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1, hw / std::max(1, comm.localSize()));
}

void reportError(const char *what, const CommBase *comm) {
  std::fflush(stdout);
  if (comm && comm->size() > 1)
    fmt::print(stderr, "train: error: rank {}: {}\n", comm->rank(), what);
  else
    fmt::print(stderr, "train: error: {}\n", what);
  std::fflush(stderr);
}

} // namespace

int runMain(int argc, char **argv, const ModelSpec &spec) {
  routeSignalsToOwnThread(); // before any thread starts: preempt.h says why
  std::unique_ptr<CommBase> comm;
  std::string error;
  bool collective = false, fatal = false;
  try {
    validateSpec(spec);
    Options opts;
    if (std::optional<int> exitCode = parseOptions(argc, argv, spec, opts))
      return *exitCode;
    const DeviceChoice device = chooseDevice(spec, opts.device);
    const LaunchInfo launch = detectLaunch(opts.localRankArg);
    if (device.cuda)
      deviceBackend()->preselectDevice(launch.localRank >= 0 ? launch.localRank
                                                             : launch.torchLocalRank);
    comm = createCommunicator(opts.comm, opts.commTimeout, launch,
                              argc > 0 && argv[0] ? argv[0] : "train", device.cuda);
    comm->setBuckets(spec);
    if (device.cuda) {
      // Ranks started by an MPI launcher agree on the run (--device
      // included) before NCCL starts; torchrun's ranks only meet in NCCL.
      checkSameRun(*comm, spec, opts, true);
      comm = deviceBackend()->createCommunicator(std::move(comm), wantNccl(opts.comm, launch),
                                                 launch, opts);
      comm->setBuckets(spec);
    }
    checkLaunchAgreement(launch, *comm);
    checkSameRun(*comm, spec, opts, device.cuda);
    if (opts.gradcheck && spec.shardStage == 3)
      throw CollectiveError("--gradcheck reads the parameters whole, but this program shards "
                            "them (dtc --shard=parameters); check a program compiled without it");
    if (opts.gradcheck && comm->size() > 1)
      throw CollectiveError(fmt::format("--gradcheck checks a single process, but {} ranks "
                                        "were started; run it without a launcher",
                                        comm->size()));
    const int threads = opts.threadsGiven ? opts.threads : defaultThreads(*comm);
    // Overlap needs a core for the communication thread besides the
    // compute threads: without one, an all-reduce started during backward
    // takes turns with the computation, and spins while it waits for the
    // other ranks (deep_mlp on 2 ranks x 1 thread, 2 cores: 6% slower).
    // With the default --threads (all of the rank's cores), auto is off.
    if (!device.cuda)
      comm->setDeferredStarts(!overlapAllreduces(opts.overlap, defaultThreads(*comm), threads));
    setKernelThreads(device.cuda ? 1 : threads, comm->localSize() == 1);
    if (!device.cuda) // on a device the steps' GEMMs are cuBLAS's
      gemm_engine::setThreads(threads);
    checkOutputs(*comm, opts);
    if (opts.calibrate) // every rank measures; rank 0 writes (calibrate.h)
      return runCalibration(opts, *comm, threads, device.cuda);
    if (!opts.predictPath.empty())
      return predict(spec, opts, *comm);
    if (opts.sampleTokens > 0)
      return sample(spec, opts, *comm);
    checkStepMemory(spec, opts.batch, /*hostSteps=*/!device.cuda);
    const int64_t beforeData = residentBytes();
    DataSplits data = loadData(opts.data, spec);
    // (What loading kept resident, where more than the splits hold: the
    // text's file list, the window index.)
    const int64_t dataBytes =
        std::max(dataSetBytes(data), residentBytes() - beforeData);
    if (!opts.quiet && comm->rank() == 0)
      for (const std::string &note : data.notes)
        fmt::print(stderr, "train: note: {}\n", note);
    checkSameData(*comm, data);
    checkPlan(spec, opts, *comm, dataBytes);
    std::optional<LoadedTrainingState> resumed = loadResume(*comm, spec, opts, data);
    forgetRunInputs("--resume"); // in memory now: --checkpoint may replace its file
    RunStart begin;
    if (resumed) {
      begin.step = resumed->state.step;
      begin.epoch = resumed->state.epoch;
      begin.epochSamples = resumed->state.epochSamples;
      if (begin.epoch > opts.epochs || (opts.maxSteps > 0 && begin.step >= opts.maxSteps))
        throw CollectiveError(fmt::format(
            "the run in '{}' is complete ({} steps, next epoch {} of --epochs {}{}); give a "
            "larger --epochs or --max-steps to train on",
            opts.resumePath == "auto" ? opts.checkpointPath : opts.resumePath, begin.step,
            begin.epoch, opts.epochs,
            opts.maxSteps > 0 ? fmt::format(", --max-steps {}", opts.maxSteps) : ""));
    }
    if (resumed) // its --batch
      checkStepMemory(spec, opts.batch, /*hostSteps=*/!device.cuda);
    Session session(spec, opts, std::move(data), *comm, /*hostSteps=*/!device.cuda,
                    resumed ? &resumed->persistent : nullptr);
    resumed.reset();
    std::unique_ptr<Executor> exec =
        device.cuda ? deviceBackend()->createExecutor(session) : makeCpuExecutor(session);
    if (!opts.quiet && comm->rank() == 0)
      printHeader(session, *exec, device);
    if (opts.gradcheck)
      return runGradcheck(session, *exec) ? 0 : 1;
    return train(session, *exec, begin, dataBytes, /*hostSteps=*/!device.cuda);
  } catch (const std::bad_alloc &) {
    error = "out of memory";
  } catch (const std::exception &e) {
    error = e.what();
    collective = dynamic_cast<const CollectiveError *>(&e) != nullptr;
    fatal = dynamic_cast<const FatalCommError *>(&e) != nullptr;
  } catch (...) {
    error = "unknown exception";
  }
  reportError(error.c_str(), comm.get());
  // Another rank may be blocked in a collective waiting for this one, or
  // this rank's communication thread may be stuck inside MPI: end the
  // process now (the launcher then ends the others). Errors every rank
  // raised together shut down cleanly instead.
  if (fatal || (comm && (comm->broken() || (comm->size() > 1 && !collective))))
    ::_exit(1);
  return 1;
}

} // namespace dtc::rt
