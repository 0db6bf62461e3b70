//===- sinks.h - What train reports and writes of the training loop -------===//
//
// The TrainingSinks (training_loop.h) of a `train` run; the driver adds
// those the options ask for, in this order:
//  - TraceSink (--trace, every rank its own file): records the first
//    --trace-steps steps of the run and writes them as a Chrome trace.
//  - CheckpointSink (--checkpoint, rank 0): writes the training state where
//    the loop says a checkpoint is due (--checkpoint-keep: and keeps the
//    latest K).
//  - MetricsSink (--metrics, rank 0): one CSV row per step, the whole file
//    rewritten at each checkpoint and at the run's end.
//  - ConsoleSink (rank 0): the progress display, the epoch lines, the
//    evaluation of --epochs 0 and the line of a run stopped by a signal.
// The order is what train writes in: at a checkpoint, the training state
// before the metrics file; at the run's end, the trace, then the metrics
// file, then the last line. No sink knows of another.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "train/progress.h"
#include "support/tracer.h"
#include "train/training_loop.h"

#include <memory>
#include <string>
#include <vector>

namespace dtc::rt {

class CommBase;
class Executor;
struct Session;

// stdout: Progress, "epoch 2/5 train_loss ... images/s ... time ...s",
// "eval test_loss ...", "stopped by SIGTERM after step K: ...".
class ConsoleSink final : public TrainingSink {
public:
  // The progress display per o.progress (off with --quiet); `ranks` > 1
  // makes auto print lines instead of a bar.
  ConsoleSink(const ModelSpec &spec, const Options &o, int ranks);

  void onEvaluation(const std::vector<double> &results) override;
  void onEpochStart(int64_t epoch, int64_t steps) override;
  void onProgress(const EpochProgress &p) override;
  void onEpochTrained(int64_t epoch) override;
  void onEpochEnd(const EpochSummary &epoch, const std::vector<double> &results) override;
  void onStepEvaluation(int64_t step, bool validation,
                        const std::vector<double> &results) override;
  void onRunEnd(const RunEnd &end) override;

private:
  // " test_loss 0.4567 test_accuracy 0.8312"
  std::string testResults(const std::vector<double> &results,
                          const char *split = "test") const;

  const ModelSpec &spec_;
  const int64_t epochs_;
  const std::string checkpointPath_;
  Progress progress_;
};

// --metrics FILE: one CSV row per training step, "epoch,step,batch,<outputs>,
// lr,seconds" (batch: the step's global batch; outputs: their global means,
// so the loop must run with LoopConfig::globalStepMeans on every rank).
// The rows are kept and the whole file is written through an AtomicFile at
// each checkpoint and at the run's end, so that the file on disk always
// matches the latest checkpoint; a resumed run starts from the rows of the
// steps its checkpoint holds (those of an earlier file at the same path).
class MetricsSink final : public TrainingSink {
public:
  MetricsSink(std::string path, const ModelSpec &spec);

  void onRunStart(const RunStart &start) override;
  void onStep(const StepInfo &step, const StepOutputs &outputs) override;
  void onCheckpoint(const TrainingPosition &at) override;
  void onRunEnd(const RunEnd &end) override;

private:
  void keepEarlierRows(int64_t step);
  void commit();

  const std::string path_;
  const int32_t numOutputs_;
  std::string header_, text_;
  std::string predicted_; // ",<step seconds>,<peak bytes>" of dtc's prediction
};

// --trace FILE: the first `steps` steps of the run (the executor's and the
// communicator's spans inside them) as this rank's Chrome trace
// (Tracer::rankPath), written when they are done, or at the run's end when
// it has fewer; with `report`, says so on stdout.
class TraceSink final : public TrainingSink {
public:
  TraceSink(std::string path, int64_t steps, bool report, Executor &exec, CommBase &comm);

  void onRunStart(const RunStart &start) override;
  void beforeStep(int64_t step) override;
  void afterStep(int64_t step) override;
  void onRunEnd(const RunEnd &end) override;

private:
  void finish(int64_t steps);

  const std::string path_;
  const int64_t steps_;
  const bool report_;
  Executor &exec_;
  CommBase &comm_;
  std::unique_ptr<Tracer> tracer_; // while recording
  int64_t traced_ = 0;
  std::string stepName_;
};

// --checkpoint FILE: the training state (checkpoint.h) of s at each
// checkpoint due: the parameters and optimizer state (from the executor),
// the position, and the options and data that shaped the run. With
// --checkpoint-keep K > 1 also as <stem>.step<N><ext>, the latest K kept.
class CheckpointSink final : public TrainingSink {
public:
  CheckpointSink(Session &s, Executor &exec);

  void onCheckpoint(const TrainingPosition &at) override;

private:
  Session &s_;
  Executor &exec_;
  const uint64_t trainDigest_;
};

// The run's end (every rank: a collective; rank 0 prints): the measured
// step time (the median interval between optimizer steps, after the first
// two) and peak memory (the largest rank's peak resident set, the OS's
// VmHWM) next to dtc's prediction (ModelSpec::prediction), which the data
// set's resident bytes (`dataBytes`, the largest rank's) are added to.
class PredictionSink final : public TrainingSink {
public:
  // hostSteps: the steps run on the host's cores (not a device's), whose
  // speed a calibrated prediction's reference measures.
  PredictionSink(const ModelSpec &spec, const Options &o, CommBase &comm, int64_t dataBytes,
                 bool hostSteps);

  void onStep(const StepInfo &step, const StepOutputs &outputs) override;
  void onRunEnd(const RunEnd &end) override;

private:
  const ModelSpec &spec_;
  const int64_t batch_;
  const bool quiet_;
  CommBase &comm_;
  const int64_t dataBytes_;
  const bool hostSteps_;
  // The intervals between optimizer steps after the first two, the latest
  // kKeptIntervals of them (a ring: a long run keeps no more).
  static constexpr size_t kKeptIntervals = 4096;
  std::vector<double> intervals_;
  size_t optimizerSteps_ = 0, nextInterval_ = 0;
  double lastStart_ = 0; // seconds
};

} // namespace dtc::rt
