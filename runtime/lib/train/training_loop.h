//===- training_loop.h - The training loop and the sinks of its events ----===//
//
// TrainingLoop runs the epochs: the batches of each from the Sampler, the
// steps on the Executor, the reading of their outputs, the ranks' agreement
// on a preemption signal, and the decisions that an evaluation or a
// checkpoint is due. It reports what happens as events to TrainingSinks and
// knows nothing of what they do with them: the console log and progress,
// the --metrics file, the --trace recording and the checkpoint writer are
// sinks (sinks.h) that the driver chooses from the options. The loop writes
// no file and prints nothing.
//
// The events of a run, on every rank, in order:
//
//   onRunStart
//   onEvaluation              (--epochs 0 only; no epoch follows)
//   for each epoch:
//     onEpochStart
//     for each step:
//       beforeStep, afterStep (around the executor's call that runs the step
//                              on the CPU, or queues it on a device)
//       when outputs are read (after every step on the CPU; on a device
//       every Executor::outputSlots() steps, before a checkpoint due and at
//       the epoch's end): onStep for each step read, in step order, then
//       onProgress
//       onStepEvaluation      (every LoopConfig::evalEvery steps, after
//                              their outputs are read)
//       onCheckpoint          (every LoopConfig::checkpointEvery steps but
//                              the epoch's or the run's last: see below)
//     onEpochTrained          (the epoch's steps are done and read)
//     onEpochEnd              (after the epoch's evaluation: of the
//                              validation set when one is held out, else
//                              of the test set)
//     onCheckpoint            (the epoch's end, or --max-steps in it)
//   onEvaluation              (with a validation set: the test set's, after
//                              training, unless a preemption stopped it)
//   onRunEnd
//
// A preemption signal (LoopConfig::checkpoints) stops the run at a step
// boundary: onEpochTrained, onCheckpoint and onRunEnd follow, with no
// onEpochEnd for the stopped epoch. No onCheckpoint comes twice for the same
// step. An error (a non-finite loss) ends the run with an exception: no
// onRunEnd.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "options/options.h"
#include "train/preempt.h"
#include "data/sampler.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace dtc::rt {

struct Session;
class Executor;

// Where the loop starts: a fresh run, or a resumed one.
struct RunStart {
  int64_t step = 0, epoch = 1, epochSamples = 0;
};

// A training step whose outputs have been read.
struct StepInfo {
  int64_t epoch, step;   // step: 1-based over the whole run (Hyper::step)
  int64_t batchIndex;    // 0-based within the epoch
  int64_t samples;       // this rank's
  int64_t globalSamples; // over all ranks
  float lr;
  double seconds; // since the run's start, when the step was queued
  bool lastOfStep = true; // false: a micro-batch before its step's last
};

// A step's outputs (ModelSpec::numOutputs values: loss first, then metrics).
struct StepOutputs {
  const float *local;  // this rank's: means over its samples
  const float *global; // means over the step's samples on every rank; null
                       // unless LoopConfig::globalStepMeans
};

// The epoch so far, after a read of outputs.
struct EpochProgress {
  int64_t epoch;
  int64_t stepsDone;       // of the epoch (1-based step of the last one read)
  double meanLoss;         // this rank's running loss, weighted by batch sizes
  double samplesPerSecond; // all ranks' samples since the epoch's start
};

// An epoch trained to its end or to --max-steps.
struct EpochSummary {
  int64_t epoch;
  double trainLoss;    // over every rank, weighted by batch sizes
  int64_t samples;     // trained on, over every rank
  double trainSeconds; // the epoch's steps
  double seconds;      // steps and evaluation
  bool validation;     // the results are the validation set's (else the test set's)
};

// Where the training state is when a checkpoint is due: after `step`, at
// position `epochSamples` of `epoch`'s order (the samples of it done).
struct TrainingPosition {
  int64_t step, epoch, epochSamples;
};

// How the run ended.
struct RunEnd {
  int64_t step = 0; // the last step done
  // 0: trained to the end; a signal caught here (SIGTERM, ...); -1: a
  // signal caught on another rank.
  int signal = 0;
  bool preempted() const { return signal != 0; }
};

// What consumes the loop's events. Every hook does nothing unless
// overridden; a sink sees no other sink. The results of an evaluation are
// the means over the test set of each output, empty when none was run.
class TrainingSink {
public:
  virtual ~TrainingSink() = default;

  virtual void onRunStart(const RunStart &start) { (void)start; }
  // --epochs 0: the evaluation of the parameters as they are.
  virtual void onEvaluation(const std::vector<double> &results) { (void)results; }
  virtual void onEpochStart(int64_t epoch, int64_t steps) { (void)epoch, (void)steps; }
  // Around the executor's call that runs the step (CPU) or queues it
  // (device); its outputs come later, with onStep.
  virtual void beforeStep(int64_t step) { (void)step; }
  virtual void afterStep(int64_t step) { (void)step; }
  virtual void onStep(const StepInfo &step, const StepOutputs &outputs) {
    (void)step, (void)outputs;
  }
  virtual void onProgress(const EpochProgress &progress) { (void)progress; }
  // The epoch's steps are done and read (also when a signal stops it).
  virtual void onEpochTrained(int64_t epoch) { (void)epoch; }
  virtual void onEpochEnd(const EpochSummary &epoch, const std::vector<double> &results) {
    (void)epoch, (void)results;
  }
  // --eval-every N: the evaluation after step `step` (validation: of the
  // validation set, else of the test set).
  virtual void onStepEvaluation(int64_t step, bool validation,
                                const std::vector<double> &results) {
    (void)step, (void)validation, (void)results;
  }
  virtual void onCheckpoint(const TrainingPosition &at) { (void)at; }
  virtual void onRunEnd(const RunEnd &end) { (void)end; }
};

// What the loop does besides training: the same on every rank.
struct LoopConfig {
  int64_t epochs = 1;   // 0: evaluate only
  int64_t maxSteps = 0; // 0: no limit
  bool evaluate = true; // at each epoch's end (the validation set, else the
                        // test set) and, with a validation set, the test
                        // set after training
  // Checkpoints due (onCheckpoint) at each epoch's end, at --max-steps,
  // every checkpointEvery steps (0: never) and on a preemption signal,
  // which the loop catches only with checkpoints on.
  bool checkpoints = false;
  int64_t checkpointEvery = 0;
  // Every evalEvery steps (0: never) an evaluation of the validation set
  // (else of the test set) between steps: onStepEvaluation.
  int64_t evalEvery = 0;
  // Each read of outputs all-reduces the steps' outputs for
  // StepOutputs::global (a collective: every rank, or none).
  bool globalStepMeans = false;
};

// The loop's settings from the command line.
LoopConfig loopConfig(const Options &o);

class TrainingLoop {
public:
  // The sinks get the events in the order given.
  TrainingLoop(Session &s, Executor &exec, const LoopConfig &config,
               std::vector<TrainingSink *> sinks);
  TrainingLoop(const TrainingLoop &) = delete;
  TrainingLoop &operator=(const TrainingLoop &) = delete;

  // Trains from `start` to the end, to config.maxSteps or to a preemption
  // signal (then every rank leaves together, after the sinks' onRunEnd).
  // The handler of preemption signals stays installed as long as the loop
  // exists.
  RunEnd run(const RunStart &start);

private:
  using Clock = std::chrono::steady_clock;
  // The epoch's running sums, over this rank's steps read so far.
  struct EpochState {
    int64_t epoch;
    Clock::time_point start;
    double lossSum = 0;
    int64_t seen = 0, globalSeen = 0;
  };

  bool runEpoch(int64_t epoch, int64_t startPosition);
  void readOutputs(EpochState &e);
  int agreeOnSignal(bool boundary);
  void checkpoint(int64_t epoch, int64_t position);
  std::vector<double> evaluate(const Dataset &ds);
  // Calls hook(args...) on every sink, in order.
  template <class... Params, class... Args>
  void emit(void (TrainingSink::*hook)(Params...), const Args &...args) {
    for (TrainingSink *sink : sinks_)
      (sink->*hook)(args...);
  }

  Session &s_;
  Executor &exec_;
  const LoopConfig config_;
  // Each step's learning rate: the session's --lr through its schedule
  // (schedule.h), decaySteps 0 resolved to epochs x steps per epoch.
  LrSchedule schedule_;
  const std::vector<TrainingSink *> sinks_;
  const bool evaluate_, validate_;
  const size_t numOutputs_;
  const int64_t slots_;
  const int64_t micro_; // micro-batches per optimizer step (--accumulate)
  Sampler sampler_;
  std::vector<StepInfo> pending_; // micro-batches queued whose outputs are not read yet
  std::vector<StepInfo> done_;    // readOutputs: the steps they make up
  std::vector<double> partial_;
  std::vector<float> outs_;
  // Per pending step: its outputs weighted by its batch size, then the size.
  std::vector<double> stepSums_;
  std::vector<float> stepMeans_;
  std::optional<PreemptionHandler> preemption_;
  Clock::time_point start_;
  int64_t step_ = 0, checkpointedStep_ = -1;
  int64_t boundaries_ = 0, checkEvery_ = 1;
  int signal_ = 0;
  bool stop_ = false;
};

} // namespace dtc::rt
