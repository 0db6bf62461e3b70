//===- sinks.cpp - Console, metrics file, trace and checkpoint sinks ------===//
#include "train/sinks.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/shards.h"
#include "comm/comm_impl.h"
#include "support/error.h"
#include "train/calibrate.h"
#include "train/executor.h"
#include "support/files.h"
#include "train/preempt.h"
#include "train/session.h"
#include "support/resident.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <unistd.h>
#include <utility>

namespace dtc::rt {

//===--- ConsoleSink --------------------------------------------------------===//

ConsoleSink::ConsoleSink(const ModelSpec &spec, const Options &o, int ranks)
    : spec_(spec), epochs_(o.epochs), checkpointPath_(o.checkpointPath),
      progress_(o.quiet ? ProgressMode::Off : o.progress, o.epochs, ranks > 1,
                spec.inputType == ElementType::I32 ? spec.inputNumel : 0) {}

std::string ConsoleSink::testResults(const std::vector<double> &results,
                                     const char *split) const {
  std::string line;
  for (int32_t i = 0; i < spec_.numOutputs; ++i)
    line += fmt::format(" {}_{} {:.4f}", split, spec_.outputNames[i], results[size_t(i)]);
  return line;
}

void ConsoleSink::onEvaluation(const std::vector<double> &results) {
  fmt::print("eval{}\n", testResults(results));
  std::fflush(stdout);
}

void ConsoleSink::onEpochStart(int64_t epoch, int64_t steps) { progress_.beginEpoch(epoch, steps); }

void ConsoleSink::onProgress(const EpochProgress &p) {
  progress_.update(p.stepsDone, p.meanLoss, p.samplesPerSecond);
}

void ConsoleSink::onEpochTrained(int64_t) { progress_.endEpoch(); }

void ConsoleSink::onEpochEnd(const EpochSummary &e, const std::vector<double> &results) {
  std::string line = fmt::format("epoch {}/{} train_loss {:.4f}", e.epoch, epochs_, e.trainLoss);
  if (!results.empty())
    line += testResults(results, e.validation ? "val" : "test");
  // A language model's throughput in tokens (its samples are windows).
  const bool tokens = spec_.inputType == ElementType::I32;
  const double rate =
      double(e.samples) * double(tokens ? spec_.inputNumel : 1) / e.trainSeconds;
  line += fmt::format(" {}/s {:.0f} time {:.2f}s", tokens ? "tokens" : "images", rate, e.seconds);
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

void ConsoleSink::onStepEvaluation(int64_t step, bool validation,
                                   const std::vector<double> &results) {
  progress_.line(fmt::format("step {}{}", step, testResults(results, validation ? "val" : "test")));
}

void ConsoleSink::onRunEnd(const RunEnd &end) {
  if (!end.preempted())
    return;
  const char *what =
      end.signal > 0 ? PreemptionHandler::name(end.signal) : "a signal to another rank";
  fmt::print("stopped by {} after step {}: the training state is in {}; continue with "
             "--resume {}\n",
             what, end.step, checkpointPath_, checkpointPath_);
  std::fflush(stdout);
}

//===--- MetricsSink --------------------------------------------------------===//

MetricsSink::MetricsSink(std::string path, const ModelSpec &spec)
    : path_(std::move(path)), numOutputs_(spec.numOutputs) {
  header_ = "epoch,step,batch";
  for (int32_t i = 0; i < spec.numOutputs; ++i)
    header_ += fmt::format(",{}", spec.outputNames[i]);
  header_ += ",lr,seconds";
  // Where dtc predicted the step: rank 0's peak resident set so far, next
  // to the prediction.
  if (spec.prediction.stepSeconds > 0) {
    header_ += ",peak_bytes,predicted_step_seconds,predicted_peak_bytes";
    predicted_ = fmt::format(",{:.6g},{}", spec.prediction.stepSeconds,
                             spec.prediction.peakBytes);
  }
  header_ += "\n";
  text_ = header_;
}

void MetricsSink::onRunStart(const RunStart &start) {
  if (start.step > 0)
    keepEarlierRows(start.step);
}

void MetricsSink::onStep(const StepInfo &step, const StepOutputs &outputs) {
  if (!outputs.global)
    throw Error("internal error: the metrics file needs the steps' global means");
  text_ += fmt::format("{},{},{}", step.epoch, step.step, step.globalSamples);
  for (int32_t i = 0; i < numOutputs_; ++i)
    text_ += fmt::format(",{:.6g}", outputs.global[i]);
  // The rate as the float it is, in the fewest digits that read back to it.
  text_ += fmt::format(",{},{:.3f}", step.lr, step.seconds);
  if (!predicted_.empty())
    text_ += fmt::format(",{}{}", peakResidentBytes(), predicted_);
  text_ += "\n";
}

void MetricsSink::onCheckpoint(const TrainingPosition &) { commit(); }

void MetricsSink::onRunEnd(const RunEnd &) { commit(); }

void MetricsSink::commit() {
  AtomicFile out(path_, "metrics file");
  out.write(text_);
  out.commit();
}

// The rows of steps <= step of the file at path_, if it is one of ours.
void MetricsSink::keepEarlierRows(int64_t step) {
  std::FILE *f = std::fopen(path_.c_str(), "r");
  if (!f)
    return;
  std::string old;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
    old.append(buf, n);
  std::fclose(f);
  if (old.compare(0, header_.size(), header_) != 0)
    return;
  for (size_t at = header_.size(); at < old.size();) {
    size_t eol = old.find('\n', at);
    if (eol == std::string::npos)
      break;
    const size_t comma = old.find(',', at);
    long long rowStep = comma < eol ? std::atoll(old.c_str() + comma + 1) : 0;
    if (rowStep < 1 || rowStep > step)
      break;
    text_.append(old, at, eol + 1 - at);
    at = eol + 1;
  }
}

//===--- TraceSink ----------------------------------------------------------===//

TraceSink::TraceSink(std::string path, int64_t steps, bool report, Executor &exec, CommBase &comm)
    : path_(std::move(path)), steps_(steps), report_(report), exec_(exec), comm_(comm) {}

void TraceSink::onRunStart(const RunStart &) {
  tracer_ = std::make_unique<Tracer>(comm_.rank());
  // Where the step's all-reduces start (--overlap; trace.sh checks it).
  tracer_->setMetadata("overlap", comm_.deferredStarts() ? "off" : "on");
}

void TraceSink::beforeStep(int64_t step) {
  if (!tracer_)
    return;
  ++traced_;
  exec_.setTracer(tracer_.get());
  comm_.setTracer(tracer_.get());
  stepName_ = fmt::format("step {}", step);
  tracer_->begin(stepName_.c_str());
}

void TraceSink::afterStep(int64_t) {
  if (!tracer_)
    return;
  tracer_->end();
  if (traced_ == steps_)
    finish(steps_);
}

void TraceSink::onRunEnd(const RunEnd &) {
  if (tracer_) // fewer steps than --trace-steps
    finish(traced_);
}

void TraceSink::finish(int64_t steps) {
  exec_.setTracer(nullptr);
  comm_.setTracer(nullptr);
  const std::string path = Tracer::rankPath(path_, comm_.rank());
  tracer_->write(path);
  tracer_.reset();
  if (!report_)
    return;
  std::string others;
  if (comm_.size() == 2)
    others = fmt::format(" (rank 1: {})", Tracer::rankPath(path_, 1));
  else if (comm_.size() > 2)
    others = fmt::format(" (ranks 1-{}: {}, ...)", comm_.size() - 1, Tracer::rankPath(path_, 1));
  fmt::print("wrote a trace of {} step{} to {}{}\n", steps, steps == 1 ? "" : "s", path, others);
}

//===--- CheckpointSink -----------------------------------------------------===//

namespace {

// "ck.safetensors" and step 120: "ck.step120.safetensors" (--checkpoint-keep).
std::string keptCheckpointName(const std::string &path, int64_t step) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  const bool hasExt = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  const std::string stem = hasExt ? path.substr(0, dot) : path;
  const std::string ext = hasExt ? path.substr(dot) : std::string();
  return fmt::format("{}.step{}{}", stem, step, ext);
}

// Removes kept checkpoints of path beyond the `keep` highest steps (never
// the one just written).
void pruneKeptCheckpoints(const std::string &path, int64_t keep, const std::string &latest) {
  const std::string dir = directoryOf(path);
  const std::string base = path.substr(path.find_last_of('/') + 1);
  const std::string probe = keptCheckpointName(base, 0); // "ck.step0.safetensors"
  const std::string prefix = probe.substr(0, probe.find(".step0") + 5);
  const std::string suffix = probe.substr(prefix.size() + 1);
  std::vector<std::pair<int64_t, std::string>> found;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix))
        continue;
      const std::string digits =
          name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
      if (digits.empty() || digits.size() > 18 ||
          digits.find_first_not_of("0123456789") != std::string::npos)
        continue;
      found.push_back(
          {std::stoll(digits),
           (dir == "." && path.find('/') == std::string::npos ? name : dir + "/" + name)});
    }
    ::closedir(d);
  }
  std::sort(found.begin(), found.end());
  int64_t excess = int64_t(found.size()) - keep;
  for (auto &[step, name] : found) {
    if (excess <= 0)
      break;
    if (name == latest)
      continue;
    ::unlink(name.c_str());
    --excess;
  }
}

} // namespace

CheckpointSink::CheckpointSink(Session &s, Executor &exec)
    : s_(s), exec_(exec), trainDigest_(datasetDigest(s.data.train)) {}

void CheckpointSink::onCheckpoint(const TrainingPosition &at) {
  const Options &o = s_.opts;
  exec_.persistentToHost();
  // Sharded: the optimizer state gathered from every rank's shards.
  std::vector<float> gathered;
  std::vector<char> image; // stage 3: the parameters, gathered
  if (s_.spec.shardStage > 0) {
    gathered = gatherShardedState(s_.spec, s_.comm, s_.persistent.data());
    if (s_.spec.shardStage == 3)
      image = gatherParamImage(s_.spec, s_.comm, s_.persistent.data());
    if (s_.comm.rank() != 0)
      return;
  }
  TrainingState st;
  st.step = at.step;
  st.epoch = at.epoch;
  st.epochSamples = at.epochSamples;
  st.ranks = s_.comm.size();
  st.batch = o.batch;
  st.accumulate = o.accumulate;
  st.seed = o.seed;
  st.shuffle = o.shuffle;
  st.lr = o.lr;
  st.schedule = o.schedule;
  st.epochs = o.epochs;
  st.maxSteps = o.maxSteps;
  st.data = o.data.describe();
  st.trainSamples = s_.data.train.size;
  st.trainDigest = trainDigest_;
  const std::string kept =
      o.checkpointKeep > 1 ? keptCheckpointName(o.checkpointPath, at.step) : std::string();
  saveTrainingState(o.checkpointPath, s_.spec, s_.persistent.data(), st, kept,
                    gathered.empty() ? nullptr : gathered.data(),
                    image.empty() ? nullptr : image.data());
  if (!kept.empty())
    pruneKeptCheckpoints(o.checkpointPath, o.checkpointKeep, kept);
}

//===--- PredictionSink -----------------------------------------------------===//

PredictionSink::PredictionSink(const ModelSpec &spec, const Options &o, CommBase &comm,
                               int64_t dataBytes, bool hostSteps)
    : spec_(spec), batch_(o.batch), quiet_(o.quiet), comm_(comm), dataBytes_(dataBytes),
      hostSteps_(hostSteps) {
  intervals_.reserve(kKeptIntervals);
}

void PredictionSink::onStep(const StepInfo &step, const StepOutputs &) {
  if (!step.lastOfStep)
    return;
  // (The first two steps warm up.)
  if (++optimizerSteps_ > 3) {
    const double interval = step.seconds - lastStart_;
    if (intervals_.size() < kKeptIntervals)
      intervals_.push_back(interval);
    else
      intervals_[nextInterval_++ % kKeptIntervals] = interval;
  }
  lastStart_ = step.seconds;
}

void PredictionSink::onRunEnd(const RunEnd &end) {
  // (On every rank alike.) A program without dtc's prediction (one built
  // from IR without it) prints nothing.
  if (end.preempted() || optimizerSteps_ == 0 || spec_.prediction.stepSeconds <= 0)
    return;
  const ModelSpec::Prediction &p = spec_.prediction;
  // The host's speed now against the calibration's (a program planned from
  // a calibrated machine whose steps run on the host): the reference GEMMs
  // sustained on every rank at once, as --calibrate measured them (about
  // 0.6 s, after the measured steps; --quiet too, so that every rank takes
  // part whatever its options). Not at another world size than the
  // calibration's, whose sharing of the cores it does not have.
  double speed = 0; // the reference's seconds now against calibrated
  if (p.referenceSeconds > 0 && hostSteps_ && p.ranks == comm_.size())
    speed = hostSpeedAgainst(comm_, p.referenceSeconds);
  // Every rank's peak, and the data's bytes, to rank 0.
  const int64_t mine[2] = {peakResidentBytes(), dataBytes_};
  std::vector<int64_t> all(size_t(2 * comm_.size()));
  if (comm_.size() > 1)
    comm_.allgather(mine, all.data(), sizeof mine);
  else
    std::copy(mine, mine + 2, all.begin());
  if (comm_.rank() != 0 || quiet_)
    return;
  int64_t peak = 0, data = 0;
  for (int r = 0; r < comm_.size(); ++r) {
    peak = std::max(peak, all[size_t(2 * r)]);
    data = std::max(data, all[size_t(2 * r + 1)]);
  }
  auto mib = [](double bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); };
  auto ms = [](double s) { return fmt::format("{:.2f} ms", s * 1e3); };
  auto off = [](double measured, double predicted) {
    return fmt::format("{:+.1f}%", 100.0 * (predicted - measured) / measured);
  };
  std::vector<double> steps = intervals_;
  double median = 0;
  if (!steps.empty()) {
    std::nth_element(steps.begin(), steps.begin() + steps.size() / 2, steps.end());
    median = steps[steps.size() / 2];
  }
  const std::string ranks =
      comm_.size() > 1 ? fmt::format("the largest of {} ranks", comm_.size()) : "1 rank";
  if (p.batch != batch_ || p.ranks != comm_.size()) {
    fmt::print("measured: step {} (median of {}), peak memory {} ({}); dtc predicted {} and "
               "{} for batch {} on {} rank{}, not this run's batch {} on {}\n",
               steps.empty() ? std::string("-") : ms(median), steps.size(), mib(double(peak)),
               ranks, ms(p.stepSeconds), mib(double(p.peakBytes + data)), p.batch, p.ranks,
               p.ranks == 1 ? "" : "s", batch_, comm_.size());
  } else {
    const double predictedPeak = double(p.peakBytes + data);
    // The prediction's kernels at the host's speed now (its waits for
    // collectives as predicted).
    std::string atSpeed;
    if (speed > 0) {
      const double scaled = p.stepSeconds + (speed - 1) * p.computeSeconds;
      atSpeed = fmt::format("; the host's reference GEMMs x{:.2f} their calibrated time after "
                            "training: step {} at that speed ({})",
                            speed, ms(scaled),
                            steps.empty() ? std::string("too few steps") : off(median, scaled));
    }
    fmt::print("predicted vs measured: step {} vs {} ({}, median of {} steps); peak memory {} "
               "vs {} ({}, {}; the data set {} of it){}\n",
               ms(p.stepSeconds), steps.empty() ? std::string("-") : ms(median),
               steps.empty() ? std::string("too few steps") : off(median, p.stepSeconds),
               steps.size(), mib(predictedPeak), mib(double(peak)),
               off(double(peak), predictedPeak), ranks, mib(double(data)), atSpeed);
  }
  // A calibration the host has moved away from: its predictions are for
  // the speed it had then.
  if (speed > 1.25 || (speed > 0 && speed < 0.8)) {
    std::fflush(stdout);
    fmt::print(stderr,
               "train: note: this host ran the calibration's reference GEMMs {:.2f}x {} than "
               "when it was calibrated; dtc's predictions assume the calibrated speed (train "
               "--calibrate measures it again)\n",
               speed > 1 ? speed : 1 / speed, speed > 1 ? "slower" : "faster");
  }
  std::fflush(stdout);
}

} // namespace dtc::rt
