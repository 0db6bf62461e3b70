//===- training_loop.cpp - Epochs, steps, preemption, evaluation ---------===//
#include "train/training_loop.h"

#include "support/error.h"
#include "train/executor.h"
#include "train/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dtc::rt {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

} // namespace

LoopConfig loopConfig(const Options &o) {
  LoopConfig c;
  c.epochs = o.epochs;
  c.maxSteps = o.maxSteps;
  c.evaluate = o.eval;
  c.checkpoints = !o.checkpointPath.empty();
  c.checkpointEvery = o.checkpointEvery;
  c.evalEvery = o.evalEvery;
  c.globalStepMeans = !o.metricsPath.empty(); // every rank joins the per-step sums
  return c;
}

TrainingLoop::TrainingLoop(Session &s, Executor &exec, const LoopConfig &config,
                           std::vector<TrainingSink *> sinks)
    : s_(s), exec_(exec), config_(config), sinks_(std::move(sinks)),
      evaluate_(config.evaluate && s.data.test.size > 0),
      validate_(config.evaluate && s.data.validation.size > 0), numOutputs_(size_t(s.spec.numOutputs)),
      slots_(exec.outputSlots()), micro_(std::max<int64_t>(1, s.opts.accumulate)),
      sampler_(s.data.train.size, s.opts.batch * micro_, s.opts.seed, s.opts.shuffle,
               s.comm.rank(), s.comm.size()),
      outs_(size_t(slots_) * numOutputs_), stepSums_(size_t(slots_) * (numOutputs_ + 1)),
      stepMeans_(numOutputs_) {
  if (slots_ < micro_)
    throw Error("internal error: fewer output slots than micro-batches per step");
  pending_.reserve(size_t(slots_));
  // The run's last step (a function of the options a resumed run restores,
  // not of --max-steps, which only stops this invocation).
  schedule_ = s_.opts.schedule;
  if (schedule_.decaySteps == 0)
    schedule_.decaySteps = std::max<int64_t>(1, config_.epochs * sampler_.numBatches());
}

// Steps are queued on the executor; their outputs are read back every
// outputSlots() steps (every step on the CPU) and at the end of each epoch,
// then weighed, checked and reported in step order. At those reads (a step
// boundary every rank reaches together) the ranks agree on whether a
// preemption signal came, and checkpoints fall due.
RunEnd TrainingLoop::run(const RunStart &begin) {
  emit(&TrainingSink::onRunStart, begin);
  // A preemption signal ends the run at a step boundary with a checkpoint
  // (only when there is one to write: otherwise signals end it as usual).
  if (config_.checkpoints)
    preemption_.emplace();
  step_ = begin.step;
  checkpointedStep_ = -1;
  boundaries_ = 0;
  checkEvery_ = 1;
  signal_ = 0;
  stop_ = false;
  start_ = Clock::now();

  if (config_.epochs == 0 && evaluate_) { // --epochs 0: evaluate the parameters only
    const std::vector<double> results = evaluate(s_.data.test);
    emit(&TrainingSink::onEvaluation, results);
  }
  bool trained = false;
  for (int64_t epoch = begin.epoch; epoch <= config_.epochs && !stop_; ++epoch) {
    trained = true;
    if (!runEpoch(epoch, epoch == begin.epoch ? begin.epochSamples : 0))
      break;
  }
  // With a validation set the epochs were judged on it; the test set once,
  // after training.
  if (validate_ && evaluate_ && trained && signal_ == 0) {
    const std::vector<double> results = evaluate(s_.data.test);
    emit(&TrainingSink::onEvaluation, results);
  }

  const RunEnd end{step_, signal_};
  emit(&TrainingSink::onRunEnd, end);
  // Nobody leaves before rank 0 has written the checkpoint (a launcher
  // ends the job when the first rank exits non-zero).
  if (end.preempted())
    s_.comm.barrier();
  return end;
}

// One epoch from startPosition of its order; false when a preemption
// signal stopped the run in it.
bool TrainingLoop::runEpoch(int64_t epoch, int64_t startPosition) {
  const Dataset &trainSet = s_.data.train;
  EpochState e{epoch, Clock::now()};
  sampler_.setEpoch(epoch, startPosition);
  // A text's windows: drawn for this epoch, or consecutive.
  const uint64_t draw = s_.opts.shuffle ? windowDraw(s_.opts.seed, epoch) : 0;
  const int64_t steps = sampler_.numBatches();
  emit(&TrainingSink::onEpochStart, epoch, steps);
  int64_t lastB = -1; // the epoch's last step done
  // With --accumulate K a step's samples (K x --batch on each rank) go
  // through the steps in micro-batches of --batch: @accumulate_step on all
  // but the last, @train_step on the last, each staged while the one before
  // it runs.
  const int64_t B = s_.opts.batch;
  int staged = -1;
  if (steps > 0) {
    int64_t n0;
    const int64_t *idx0 = sampler_.batch(0, &n0);
    staged = exec_.stage(trainSet, idx0, std::min(B, n0), draw);
  }
  for (int64_t b = 0; b < steps && !stop_; ++b) {
    int64_t n;
    const int64_t *idx = sampler_.batch(b, &n);
    const int64_t step = s_.hyper.step = ++step_;
    s_.hyper.lr = scheduledLr(s_.opts.lr, schedule_, step);
    const uint64_t seed = stepRngSeed(s_.opts.seed, step, s_.comm.rank());
    const int64_t global = sampler_.globalBatch(b), micros = (n + B - 1) / B;
    emit(&TrainingSink::beforeStep, step);
    for (int64_t m = 0; m < micros; ++m) {
      const int64_t nm = std::min(B, n - m * B);
      const bool lastMicro = m + 1 == micros;
      s_.args.rngSeed = m == 0 ? seed : mixSeed(seed, uint64_t(m)); // dropout masks
      // This micro-batch's share of the global batch: the sum over the
      // ranks and micro-batches of the gradients is their mean.
      const float gradSeed = static_cast<float>(double(nm) / double(global));
      const int64_t slot = int64_t(pending_.size());
      if (lastMicro)
        exec_.train(staged, slot, gradSeed);
      else
        exec_.accumulate(staged, slot, gradSeed);
      pending_.push_back(StepInfo{epoch, step, b, nm, lastMicro ? global : 0, s_.hyper.lr,
                                  secondsSince(start_), lastMicro});
      if (!lastMicro)
        staged = exec_.stage(trainSet, idx + (m + 1) * B, std::min(B, n - (m + 1) * B), draw);
    }
    emit(&TrainingSink::afterStep, step);
    lastB = b;
    stop_ = config_.maxSteps > 0 && step >= config_.maxSteps;
    const bool last = b + 1 == steps;
    const bool checkpointDue =
        config_.checkpoints && config_.checkpointEvery > 0 && step % config_.checkpointEvery == 0;
    const bool evaluationDue = config_.evalEvery > 0 && step % config_.evalEvery == 0 &&
                               (validate_ || evaluate_);
    // The next step's batch, staged while this step runs on a device; after
    // an evaluation due here, which stages its own batches into the same
    // batch slots (staged before it, the next step would train on one of
    // them).
    auto stageNext = [&] {
      int64_t next;
      const int64_t *nextIdx = sampler_.batch(b + 1, &next);
      staged = exec_.stage(trainSet, nextIdx, std::min(B, next), draw);
    };
    const bool more = !last && !stop_;
    if (more && !evaluationDue)
      stageNext();
    // Outputs are read at step boundaries, before a step could overflow the
    // slots (every rank reads after the same steps).
    if (int64_t(pending_.size()) + micro_ > slots_ || checkpointDue || evaluationDue)
      readOutputs(e);
    if (evaluationDue) { // its outputs use the slots the steps' did
      const std::vector<double> results = evaluate(validate_ ? s_.data.validation : s_.data.test);
      emit(&TrainingSink::onStepEvaluation, step, validate_, results);
      if (more)
        stageNext();
    }
    if (!pending_.empty() || !config_.checkpoints)
      continue;
    // A step boundary: outputs read, every rank here after the same step.
    if ((signal_ = agreeOnSignal(/*boundary=*/true)) != 0)
      break;
    if (checkpointDue && !last && !stop_) // the epoch's end has one below
      checkpoint(epoch, sampler_.positionAfter(b));
  }
  readOutputs(e);
  const int64_t position = lastB >= 0 ? sampler_.positionAfter(lastB) : startPosition;
  if (signal_ == 0 && config_.checkpoints)
    signal_ = agreeOnSignal(/*boundary=*/false);
  if (signal_ != 0) {
    // No evaluation: the resumed run ends this epoch (position may be its
    // end) and evaluates.
    emit(&TrainingSink::onEpochTrained, epoch);
    checkpoint(epoch, position);
    return false;
  }
  double totals[2] = {e.lossSum, double(e.seen)}; // over all ranks
  s_.comm.allreduceSum(totals, 2);
  const double trainSeconds = secondsSince(e.start);
  emit(&TrainingSink::onEpochTrained, epoch);
  const std::vector<double> results = validate_   ? evaluate(s_.data.validation)
                                      : evaluate_ ? evaluate(s_.data.test)
                                                  : std::vector<double>();
  const EpochSummary summary{epoch,        totals[0] / std::max(totals[1], 1.0),
                             int64_t(totals[1]), trainSeconds,
                             secondsSince(e.start), validate_};
  emit(&TrainingSink::onEpochEnd, summary, results);
  // The epoch's end, or --max-steps inside it.
  if (lastB + 1 == steps)
    checkpoint(epoch + 1, 0);
  else
    checkpoint(epoch, position);
  return true;
}

// Reads the outputs of the pending steps and accounts for them: the
// micro-batches of a step (--accumulate) as one step, its outputs their
// sample-weighted means.
void TrainingLoop::readOutputs(EpochState &e) {
  if (pending_.empty())
    return;
  const size_t count = pending_.size();
  exec_.readOutputs(int64_t(count), outs_.data());
  // Steps, in place: done_[j] and the outputs at outs_[j * numOutputs_].
  done_.clear();
  std::vector<double> &part = partial_;
  part.assign(numOutputs_, 0.0);
  int64_t partSamples = 0;
  for (size_t k = 0; k < count; ++k) {
    const StepInfo &p = pending_[k];
    const float *out = outs_.data() + k * numOutputs_;
    const float loss = out[0];
    if (!std::isfinite(loss))
      throw Error(fmt::format("the loss became {} at epoch {} step {}; try a lower "
                              "learning rate (--lr)",
                              loss, p.epoch, p.step));
    e.lossSum += double(loss) * double(p.samples);
    e.seen += p.samples;
    e.globalSeen += p.globalSamples;
    for (size_t i = 0; i < numOutputs_; ++i)
      part[i] += double(out[i]) * double(p.samples);
    partSamples += p.samples;
    if (!p.lastOfStep)
      continue;
    float *mean = outs_.data() + done_.size() * numOutputs_;
    for (size_t i = 0; i < numOutputs_; ++i)
      mean[i] = float(part[i] / double(std::max<int64_t>(partSamples, 1)));
    StepInfo whole = p;
    whole.samples = partSamples;
    done_.push_back(whole);
    part.assign(numOutputs_, 0.0);
    partSamples = 0;
  }
  if (partSamples != 0)
    throw Error("internal error: outputs read inside a step");
  const size_t steps = done_.size();
  const size_t w = numOutputs_ + 1;
  if (config_.globalStepMeans) { // the global means of each step
    for (size_t k = 0; k < steps; ++k) {
      for (size_t i = 0; i < numOutputs_; ++i)
        stepSums_[k * w + i] = double(outs_[k * numOutputs_ + i]) * double(done_[k].samples);
      stepSums_[k * w + numOutputs_] = double(done_[k].samples);
    }
    s_.comm.allreduceSum(stepSums_.data(), int64_t(steps * w));
  }
  for (size_t k = 0; k < steps; ++k) {
    if (config_.globalStepMeans) {
      const double total = stepSums_[k * w + numOutputs_];
      for (size_t i = 0; i < numOutputs_; ++i)
        stepMeans_[i] = float(stepSums_[k * w + i] / total);
    }
    const StepOutputs outputs{outs_.data() + k * numOutputs_,
                              config_.globalStepMeans ? stepMeans_.data() : nullptr};
    emit(&TrainingSink::onStep, done_[k], outputs);
  }
  const EpochProgress progress{e.epoch, pending_.back().batchIndex + 1, e.lossSum / double(e.seen),
                               double(e.globalSeen) / secondsSince(e.start)};
  emit(&TrainingSink::onProgress, progress);
  pending_.clear();
}

// Whether any rank caught a preemption signal: a collective with more than
// one rank (an all-reduce through the communication thread, ~16 us on 2
// ranks here), so every rank asks at the same step boundaries. The first
// kCalibrate boundaries ask each time and measure the steps; then the ranks
// ask every checkEvery_ boundaries, as many as fit in ~50 ms (at most 64),
// which keeps the cost under 0.1% of a fast step and the delay of a signal
// to about 50 ms. Returns the signal (-1: one caught by another rank).
int TrainingLoop::agreeOnSignal(bool boundary) {
  constexpr int64_t kCalibrate = 10;
  if (boundary && ++boundaries_ % checkEvery_ != 0)
    return 0;
  const int sig = PreemptionHandler::requested();
  const bool calibrate = boundary && boundaries_ == kCalibrate;
  double v[2] = {double(sig), calibrate ? secondsSince(start_) / double(boundaries_) : 0};
  if (s_.comm.size() > 1)
    s_.comm.allreduceSum(v, 2); // any signal: > 0
  if (calibrate) {
    const double perBoundary = v[1] / double(s_.comm.size());
    checkEvery_ = std::clamp<int64_t>(int64_t(0.05 / std::max(perBoundary, 1e-9)), 1, 64);
  }
  return v[0] > 0 ? (sig ? sig : -1) : 0;
}

// A checkpoint of the training state after step_, at `position` of
// `epoch`'s order, unless there is one of this step already.
void TrainingLoop::checkpoint(int64_t epoch, int64_t position) {
  if (!config_.checkpoints || checkpointedStep_ == step_)
    return;
  checkpointedStep_ = step_;
  const TrainingPosition at{step_, epoch, position};
  emit(&TrainingSink::onCheckpoint, at);
}

// Runs the eval step over a data set (test or validation) in file order, each rank on its
// contiguous part (rank r: samples [r*N/W, (r+1)*N/W)), staging each batch
// while the step before it runs; returns the sample-weighted mean of each
// output over the whole set (one allreduceSum).
std::vector<double> TrainingLoop::evaluate(const Dataset &ds) {
  exec_.shareBuffers(); // every rank evaluates with rank 0's running statistics
  const size_t numOutputs = numOutputs_;
  const int64_t slots = slots_, batch = s_.opts.batch;
  // sums[i]: output i weighted by batch sizes; sums.back(): samples.
  std::vector<double> sums(numOutputs + 1, 0.0);
  std::vector<float> outs(size_t(slots) * numOutputs);
  std::vector<int64_t> pendingN;
  pendingN.reserve(size_t(slots));
  auto flush = [&] {
    if (pendingN.empty())
      return;
    exec_.readOutputs(int64_t(pendingN.size()), outs.data());
    for (size_t k = 0; k < pendingN.size(); ++k) {
      for (size_t i = 0; i < numOutputs; ++i)
        sums[i] += double(outs[k * numOutputs + i]) * double(pendingN[k]);
      sums.back() += double(pendingN[k]);
    }
    pendingN.clear();
  };
  const int64_t W = s_.comm.size(), r = s_.comm.rank();
  const int64_t begin = ds.size * r / W, end = ds.size * (r + 1) / W;
  std::vector<int64_t> idx(static_cast<size_t>(std::max<int64_t>(0, std::min(batch, end - begin))));
  auto stage = [&](int64_t b) {
    const int64_t n = std::min(batch, end - b);
    std::iota(idx.begin(), idx.begin() + n, b);
    return exec_.stage(ds, idx.data(), n);
  };
  int staged = begin < end ? stage(begin) : -1;
  for (int64_t b = begin; b < end; b += batch) {
    exec_.eval(staged, int64_t(pendingN.size()));
    pendingN.push_back(std::min(batch, end - b));
    if (b + batch < end)
      staged = stage(b + batch);
    if (int64_t(pendingN.size()) == slots)
      flush();
  }
  flush();
  s_.comm.allreduceSum(sums.data(), int64_t(sums.size()));
  const double total = std::max(sums.back(), 1.0);
  sums.pop_back();
  for (double &v : sums)
    v /= total;
  return sums;
}

} // namespace dtc::rt
