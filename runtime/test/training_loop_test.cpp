//===- training_loop_test.cpp - The training loop's events ---------------===//
//
// TrainingLoop (training_loop.h) driven on a model of test_models.h in this
// process (one rank, the local communicator) with a sink that records every
// event: the steps, the reads of their outputs, the epoch ends, the
// checkpoints due (at epoch ends, every --checkpoint-every steps, at
// --max-steps), a resumed start, and the stop on a preemption signal.
//
//===----------------------------------------------------------------------===//
#include "comm/comm_impl.h"
#include "train/executor.h"
#include "train/session.h"
#include "test_models.h"
#include "train/training_loop.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace dtc;
using namespace dtc::rt;
using dtc::test::SoftmaxReg;

namespace {

// Records each event as a line of text, and the steps' outputs.
class Recorder final : public TrainingSink {
public:
  std::vector<std::string> events;
  std::vector<StepInfo> steps;
  std::vector<std::vector<float>> local, global;
  std::vector<EpochSummary> epochs;
  std::function<void(const StepInfo &)> atStep; // called in onStep

  void onRunStart(const RunStart &s) override {
    add(fmt::format("run start after step {}: epoch {} at {}", s.step, s.epoch, s.epochSamples));
  }
  void onEvaluation(const std::vector<double> &r) override {
    add(fmt::format("evaluation: {} results", r.size()));
  }
  void onEpochStart(int64_t epoch, int64_t n) override {
    add(fmt::format("epoch {} start: {} steps", epoch, n));
  }
  void beforeStep(int64_t step) override { add(fmt::format("before step {}", step)); }
  void afterStep(int64_t step) override { add(fmt::format("after step {}", step)); }
  void onStep(const StepInfo &s, const StepOutputs &o) override {
    add(fmt::format("step {}: epoch {} batch {} samples {}", s.step, s.epoch, s.batchIndex,
                    s.samples));
    steps.push_back(s);
    local.emplace_back(o.local, o.local + 2);
    global.push_back(o.global ? std::vector<float>(o.global, o.global + 2) : std::vector<float>());
    if (atStep)
      atStep(s);
  }
  void onProgress(const EpochProgress &p) override {
    add(fmt::format("progress: epoch {} step {}", p.epoch, p.stepsDone));
  }
  void onEpochTrained(int64_t epoch) override { add(fmt::format("epoch {} trained", epoch)); }
  void onEpochEnd(const EpochSummary &e, const std::vector<double> &r) override {
    add(fmt::format("epoch {} end: {} samples, {} results", e.epoch, e.samples, r.size()));
    epochs.push_back(e);
  }
  void onCheckpoint(const TrainingPosition &at) override {
    add(fmt::format("checkpoint after step {}: epoch {} at {}", at.step, at.epoch,
                    at.epochSamples));
  }
  void onRunEnd(const RunEnd &end) override {
    add(fmt::format("run end after step {}: signal {}", end.step, end.signal));
  }

private:
  void add(std::string line) { events.push_back(std::move(line)); }
};

// Outputs deferred to `slots` slots read together, like a device executor's
// (--log-interval), over the CPU executor.
class SlottedExecutor final : public Executor {
public:
  SlottedExecutor(std::unique_ptr<Executor> cpu, int64_t slots, int32_t numOutputs)
      : cpu_(std::move(cpu)), slots_(slots), numOutputs_(numOutputs),
        outs_(size_t(slots * numOutputs)) {}
  std::string describe() const override { return "slotted"; }
  int64_t outputSlots() const override { return slots_; }
  int stage(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t draw) override {
    return cpu_->stage(ds, idx, n, draw);
  }
  void train(int b, int64_t slot, float gradSeed) override {
    cpu_->train(b, 0, gradSeed);
    cpu_->readOutputs(1, outs_.data() + slot * numOutputs_);
  }
  void accumulate(int b, int64_t slot, float gradSeed) override {
    cpu_->accumulate(b, 0, gradSeed);
    cpu_->readOutputs(1, outs_.data() + slot * numOutputs_);
  }
  void eval(int b, int64_t slot) override {
    cpu_->eval(b, 0);
    cpu_->readOutputs(1, outs_.data() + slot * numOutputs_);
  }
  void grad(int b, float *grads) override { cpu_->grad(b, grads); }
  void readOutputs(int64_t count, float *out) override {
    std::copy(outs_.begin(), outs_.begin() + count * numOutputs_, out);
  }
  void setParam(int64_t offset, float value) override { cpu_->setParam(offset, value); }
  void persistentToHost() override { cpu_->persistentToHost(); }
  void shareBuffers() override { cpu_->shareBuffers(); }
  void setTracer(Tracer *t) override { cpu_->setTracer(t); }

private:
  std::unique_ptr<Executor> cpu_;
  int64_t slots_;
  int32_t numOutputs_;
  std::vector<float> outs_;
};

// SoftmaxReg on 64 training and 16 test samples (or testSize), batch 16: 4
// steps per epoch.
struct Fixture {
  explicit Fixture(int64_t epochs = 2, int64_t slots = 1, double validation = 0,
                   int64_t testSize = 16)
      : spec(SoftmaxReg::spec()) {
    Options o = defaultOptions(spec);
    o.data.validation = validation;
    o.data.trainSize = validation > 0 ? 80 : 64;
    o.data.testSize = testSize;
    o.batch = 16;
    o.epochs = epochs;
    comm = createLocalCommunicator();
    session = std::make_unique<Session>(spec, o, loadData(o.data, spec), *comm);
    exec = makeCpuExecutor(*session);
    if (slots > 1)
      exec = std::make_unique<SlottedExecutor>(std::move(exec), slots, spec.numOutputs);
    config.epochs = epochs;
  }
  RunEnd run(const RunStart &start = RunStart()) {
    TrainingLoop loop(*session, *exec, config, {&recorder});
    return loop.run(start);
  }

  ModelSpec spec;
  std::unique_ptr<CommBase> comm;
  std::unique_ptr<Session> session;
  std::unique_ptr<Executor> exec;
  LoopConfig config;
  Recorder recorder;
};

// The events of a step run and read at once (the CPU: one output slot).
std::vector<std::string> stepEvents(int64_t step, int64_t epoch, int64_t batch) {
  return {fmt::format("before step {}", step), fmt::format("after step {}", step),
          fmt::format("step {}: epoch {} batch {} samples 16", step, epoch, batch),
          fmt::format("progress: epoch {} step {}", epoch, batch + 1)};
}

// Builds an expected sequence from lines and step blocks.
struct Events {
  std::vector<std::string> lines;
  Events &operator<<(const std::string &line) {
    lines.push_back(line);
    return *this;
  }
  Events &steps(int64_t first, int64_t last, int64_t epoch, int64_t firstBatch) {
    for (int64_t k = first; k <= last; ++k)
      for (std::string &line : stepEvents(k, epoch, firstBatch + k - first))
        lines.push_back(line);
    return *this;
  }
};

std::string joined(const std::vector<std::string> &lines) {
  std::string s;
  for (const std::string &l : lines)
    s += l + "\n";
  return s;
}

} // namespace

// The schedules' formulas (schedule.h) at their corners: the warmup's first
// and last steps, the first step after it (the full rate), the end of the
// decay and past it, a step decay's boundaries.
TEST(LrSchedule, WarmupThenDecayAtTheirCorners) {
  using K = LrSchedule::Kind;
  LrSchedule s;
  s.kind = K::Cosine;
  s.warmup = 4;
  s.decaySteps = 14;
  s.minLr = 0.1;
  EXPECT_FLOAT_EQ(scheduledLr(1.0f, s, 1), 0.25f);
  EXPECT_FLOAT_EQ(scheduledLr(1.0f, s, 4), 1.0f);
  EXPECT_FLOAT_EQ(scheduledLr(1.0f, s, 5), 1.0f);
  EXPECT_FLOAT_EQ(scheduledLr(1.0f, s, 10), 0.55f); // p = 1/2
  EXPECT_FLOAT_EQ(scheduledLr(1.0f, s, 15), 0.1f);
  EXPECT_FLOAT_EQ(scheduledLr(1.0f, s, 99), 0.1f);
  s.kind = K::Linear;
  EXPECT_FLOAT_EQ(scheduledLr(1.0f, s, 10), 0.55f);
  EXPECT_FLOAT_EQ(scheduledLr(1.0f, s, 7), 0.82f); // p = 2/10
  s.kind = K::Step;
  s.stepSize = 3;
  s.gamma = 0.5;
  EXPECT_FLOAT_EQ(scheduledLr(2.0f, s, 5), 2.0f);
  EXPECT_FLOAT_EQ(scheduledLr(2.0f, s, 7), 2.0f);
  EXPECT_FLOAT_EQ(scheduledLr(2.0f, s, 8), 1.0f);
  EXPECT_FLOAT_EQ(scheduledLr(2.0f, s, 11), 0.5f);
  s.kind = K::Constant;
  s.warmup = 0;
  EXPECT_FLOAT_EQ(scheduledLr(0.3f, s, 1), 0.3f);
  EXPECT_EQ(describeSchedule(s), "");
  s.kind = K::Cosine;
  s.warmup = 4;
  EXPECT_EQ(describeSchedule(s), "cosine(warmup=4, decay_steps=14, min_lr=0.1)");
  s.decaySteps = 0;
  EXPECT_EQ(describeSchedule(s), "cosine(warmup=4, min_lr=0.1)");
}

TEST(TrainingLoop, EpochsOfStepsThenEvaluationWithoutCheckpoints) {
  Fixture f;
  const RunEnd end = f.run();
  EXPECT_FALSE(end.preempted());
  EXPECT_EQ(end.step, 8);
  Events want;
  want << "run start after step 0: epoch 1 at 0"
       << "epoch 1 start: 4 steps";
  want.steps(1, 4, 1, 0) << "epoch 1 trained"
                         << "epoch 1 end: 64 samples, 2 results"
                         << "epoch 2 start: 4 steps";
  want.steps(5, 8, 2, 0) << "epoch 2 trained"
                         << "epoch 2 end: 64 samples, 2 results"
                         << "run end after step 8: signal 0";
  EXPECT_EQ(joined(f.recorder.events), joined(want.lines));
  for (size_t k = 0; k < f.recorder.steps.size(); ++k) {
    EXPECT_TRUE(std::isfinite(f.recorder.local[k][0])) << k;
    EXPECT_TRUE(f.recorder.global[k].empty()) << "no global means unless asked for";
    EXPECT_EQ(f.recorder.steps[k].globalSamples, 16);
    EXPECT_EQ(f.recorder.steps[k].lr, 0.05f);
  }
  // The session's parameters were trained: Hyper::step is the last step.
  EXPECT_EQ(f.session->hyper.step, 8);
}

TEST(TrainingLoop, GlobalStepMeansAndTheEpochLossWeighedBySamples) {
  Fixture f(/*epochs=*/1);
  f.config.globalStepMeans = true;
  f.config.evaluate = false;
  f.run();
  ASSERT_EQ(f.recorder.steps.size(), 4u);
  double sum = 0;
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(f.recorder.global[k], f.recorder.local[k]) << "one rank: the same means";
    sum += double(f.recorder.local[k][0]) * 16;
  }
  ASSERT_EQ(f.recorder.epochs.size(), 1u);
  EXPECT_EQ(f.recorder.epochs[0].samples, 64);
  EXPECT_DOUBLE_EQ(f.recorder.epochs[0].trainLoss, sum / 64);
  EXPECT_GE(f.recorder.epochs[0].seconds, f.recorder.epochs[0].trainSeconds);
  EXPECT_EQ(f.recorder.events[f.recorder.events.size() - 2], "epoch 1 end: 64 samples, 0 results");
}

TEST(TrainingLoop, CheckpointsDueEveryNStepsAndAtEpochEndsOncePerStep) {
  Fixture f;
  f.config.checkpoints = true;
  f.config.checkpointEvery = 2; // steps 2, 6 inside the epochs; 4 and 8 at their ends
  const RunEnd end = f.run();
  EXPECT_FALSE(end.preempted());
  Events want;
  want << "run start after step 0: epoch 1 at 0"
       << "epoch 1 start: 4 steps";
  want.steps(1, 2, 1, 0) << "checkpoint after step 2: epoch 1 at 32";
  want.steps(3, 4, 1, 2) << "epoch 1 trained"
                         << "epoch 1 end: 64 samples, 2 results"
                         << "checkpoint after step 4: epoch 2 at 0"
                         << "epoch 2 start: 4 steps";
  want.steps(5, 6, 2, 0) << "checkpoint after step 6: epoch 2 at 32";
  want.steps(7, 8, 2, 2) << "epoch 2 trained"
                         << "epoch 2 end: 64 samples, 2 results"
                         << "checkpoint after step 8: epoch 3 at 0"
                         << "run end after step 8: signal 0";
  EXPECT_EQ(joined(f.recorder.events), joined(want.lines));
}

TEST(TrainingLoop, NoCheckpointsUnlessConfigured) {
  Fixture f;
  f.config.checkpointEvery = 2; // without checkpoints: nothing is due
  f.run();
  for (const std::string &e : f.recorder.events)
    EXPECT_EQ(e.find("checkpoint"), std::string::npos) << e;
}

TEST(TrainingLoop, MaxStepsEndsTheEpochWithACheckpointOfItsPosition) {
  Fixture f;
  f.config.checkpoints = true;
  f.config.checkpointEvery = 2;
  f.config.maxSteps = 3;
  const RunEnd end = f.run();
  EXPECT_FALSE(end.preempted());
  EXPECT_EQ(end.step, 3);
  Events want;
  want << "run start after step 0: epoch 1 at 0"
       << "epoch 1 start: 4 steps";
  want.steps(1, 2, 1, 0) << "checkpoint after step 2: epoch 1 at 32";
  want.steps(3, 3, 1, 2) << "epoch 1 trained"
                         << "epoch 1 end: 48 samples, 2 results"
                         << "checkpoint after step 3: epoch 1 at 48"
                         << "run end after step 3: signal 0";
  EXPECT_EQ(joined(f.recorder.events), joined(want.lines));
}

TEST(TrainingLoop, AResumedRunStartsAtItsPosition) {
  Fixture f;
  f.config.checkpoints = true;
  const RunEnd end = f.run(RunStart{3, 1, 48});
  EXPECT_EQ(end.step, 8);
  Events want;
  want << "run start after step 3: epoch 1 at 48"
       << "epoch 1 start: 1 steps";
  want.steps(4, 4, 1, 0) << "epoch 1 trained"
                         << "epoch 1 end: 16 samples, 2 results"
                         << "checkpoint after step 4: epoch 2 at 0"
                         << "epoch 2 start: 4 steps";
  want.steps(5, 8, 2, 0) << "epoch 2 trained"
                         << "epoch 2 end: 64 samples, 2 results"
                         << "checkpoint after step 8: epoch 3 at 0"
                         << "run end after step 8: signal 0";
  EXPECT_EQ(joined(f.recorder.events), joined(want.lines));
}

// A signal (here raised while step 3's outputs are handled) stops the run at
// the next step boundary: the epoch ends without its evaluation, with a
// checkpoint of the position, and the run reports the signal.
TEST(TrainingLoop, APreemptionSignalStopsAtTheStepBoundaryWithACheckpoint) {
  Fixture f;
  f.config.checkpoints = true;
  f.recorder.atStep = [](const StepInfo &s) {
    if (s.step == 3)
      std::raise(SIGUSR1);
  };
  const RunEnd end = f.run();
  EXPECT_TRUE(end.preempted());
  EXPECT_EQ(end.signal, SIGUSR1);
  EXPECT_EQ(end.step, 3);
  Events want;
  want << "run start after step 0: epoch 1 at 0"
       << "epoch 1 start: 4 steps";
  want.steps(1, 3, 1, 0) << "epoch 1 trained"
                         << "checkpoint after step 3: epoch 1 at 48"
                         << fmt::format("run end after step 3: signal {}", SIGUSR1);
  EXPECT_EQ(joined(f.recorder.events), joined(want.lines));

  // The next run (a new handler) starts with no signal pending.
  Fixture again;
  again.config.checkpoints = true;
  EXPECT_FALSE(again.run(RunStart{3, 1, 48}).preempted());
}

// Outputs deferred to 3 slots (a device executor): the steps are read in
// groups, each group's onStep in step order and one onProgress after them;
// a checkpoint due forces a read first, so that it falls on a step
// boundary.
TEST(TrainingLoop, DeferredOutputsAreReadInGroupsAndBeforeACheckpoint) {
  Fixture f(/*epochs=*/1, /*slots=*/3);
  f.run();
  Events want;
  want << "run start after step 0: epoch 1 at 0"
       << "epoch 1 start: 4 steps"
       << "before step 1" << "after step 1" << "before step 2" << "after step 2"
       << "before step 3" << "after step 3"
       << "step 1: epoch 1 batch 0 samples 16" << "step 2: epoch 1 batch 1 samples 16"
       << "step 3: epoch 1 batch 2 samples 16" << "progress: epoch 1 step 3"
       << "before step 4" << "after step 4"
       << "step 4: epoch 1 batch 3 samples 16" << "progress: epoch 1 step 4"
       << "epoch 1 trained"
       << "epoch 1 end: 64 samples, 2 results"
       << "run end after step 4: signal 0";
  EXPECT_EQ(joined(f.recorder.events), joined(want.lines));

  Fixture c(/*epochs=*/1, /*slots=*/3);
  c.config.checkpoints = true;
  c.config.checkpointEvery = 2;
  c.run();
  Events ck;
  ck << "run start after step 0: epoch 1 at 0"
     << "epoch 1 start: 4 steps"
     << "before step 1" << "after step 1" << "before step 2" << "after step 2"
     << "step 1: epoch 1 batch 0 samples 16" << "step 2: epoch 1 batch 1 samples 16"
     << "progress: epoch 1 step 2"
     << "checkpoint after step 2: epoch 1 at 32"
     << "before step 3" << "after step 3" << "before step 4" << "after step 4"
     << "step 3: epoch 1 batch 2 samples 16" << "step 4: epoch 1 batch 3 samples 16"
     << "progress: epoch 1 step 4"
     << "epoch 1 trained"
     << "epoch 1 end: 64 samples, 2 results"
     << "checkpoint after step 4: epoch 2 at 0"
     << "run end after step 4: signal 0";
  EXPECT_EQ(joined(c.recorder.events), joined(ck.lines));
  // The deferred reads give the CPU's outputs.
  Fixture cpu(/*epochs=*/1);
  cpu.run();
  EXPECT_EQ(c.recorder.local, cpu.recorder.local);
}

TEST(TrainingLoop, EpochsZeroOnlyEvaluates) {
  Fixture f(/*epochs=*/0);
  f.config.checkpoints = true;
  const RunEnd end = f.run();
  EXPECT_EQ(end.step, 0);
  EXPECT_EQ(joined(f.recorder.events), joined({"run start after step 0: epoch 1 at 0",
                                               "evaluation: 2 results",
                                               "run end after step 0: signal 0"}));
}

// The sinks see the events in the order given, each all of them.
TEST(TrainingLoop, EverySinkGetsEveryEventInOrder) {
  Fixture f(/*epochs=*/1);
  Recorder second;
  std::vector<std::string> order;
  struct Tagger final : TrainingSink {
    std::vector<std::string> *order;
    std::string tag;
    void onStep(const StepInfo &, const StepOutputs &) override { order->push_back(tag); }
  } a, b;
  a.order = b.order = &order;
  a.tag = "a";
  b.tag = "b";
  TrainingLoop loop(*f.session, *f.exec, f.config, {&a, &f.recorder, &b, &second});
  loop.run(RunStart());
  EXPECT_EQ(joined(order), joined({"a", "b", "a", "b", "a", "b", "a", "b"}));
  EXPECT_EQ(joined(second.events), joined(f.recorder.events));
}

TEST(TrainingLoop, LoopConfigFromTheCommandLine) {
  Options o;
  o.epochs = 3;
  o.maxSteps = 7;
  o.eval = false;
  o.checkpointEvery = 5;
  LoopConfig c = loopConfig(o);
  EXPECT_EQ(c.epochs, 3);
  EXPECT_EQ(c.maxSteps, 7);
  EXPECT_FALSE(c.evaluate);
  EXPECT_FALSE(c.checkpoints);
  EXPECT_EQ(c.checkpointEvery, 5);
  EXPECT_FALSE(c.globalStepMeans);
  o.checkpointPath = "ck.st";
  o.metricsPath = "m.csv";
  c = loopConfig(o);
  EXPECT_TRUE(c.checkpoints);
  EXPECT_TRUE(c.globalStepMeans);
}

TEST(TrainingLoop, AValidationSetJudgesEachEpochAndTheTestSetComesAfterTraining) {
  // 80 samples, 0.2 held out: 64 to train on (4 steps), the last 16 to validate.
  Fixture f(2, 1, 0.2);
  ASSERT_EQ(f.session->data.train.size, 64);
  ASSERT_EQ(f.session->data.validation.size, 16);
  f.run();
  Events want;
  want << "run start after step 0: epoch 1 at 0"
       << "epoch 1 start: 4 steps";
  want.steps(1, 4, 1, 0) << "epoch 1 trained"
                         << "epoch 1 end: 64 samples, 2 results"
                         << "epoch 2 start: 4 steps";
  want.steps(5, 8, 2, 0) << "epoch 2 trained"
                         << "epoch 2 end: 64 samples, 2 results"
                         << "evaluation: 2 results"
                         << "run end after step 8: signal 0";
  EXPECT_EQ(joined(f.recorder.events), joined(want.lines));
  for (const EpochSummary &e : f.recorder.epochs)
    EXPECT_TRUE(e.validation);
}

namespace {

// A device executor's batch slots without a device: two slots used in turn,
// a handle valid until the second stage after it (executor.h), and each
// step records the data set and samples of the slot it is given.
class TwoSlotRecorder final : public Executor {
public:
  struct Batch {
    const Dataset *ds = nullptr;
    std::vector<int64_t> idx;
  };
  std::vector<Batch> trained; // in step order
  int64_t evaluated = 0;

  TwoSlotRecorder(int64_t slots, int32_t numOutputs)
      : slots_(slots), outs_(size_t(slots * numOutputs), 0.5f) {}
  std::string describe() const override { return "two slots"; }
  int64_t outputSlots() const override { return slots_; }
  int stage(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t) override {
    const int handle = next_;
    next_ ^= 1;
    slot_[handle] = Batch{&ds, std::vector<int64_t>(idx, idx + n)};
    return handle;
  }
  void train(int b, int64_t, float) override { trained.push_back(slot_[b]); }
  void accumulate(int b, int64_t, float) override { trained.push_back(slot_[b]); }
  void eval(int, int64_t) override { ++evaluated; }
  void grad(int, float *) override {}
  void readOutputs(int64_t count, float *out) override {
    std::copy(outs_.begin(), outs_.begin() + count * 2, out);
  }
  void setParam(int64_t, float) override {}
  void persistentToHost() override {}
  void shareBuffers() override {}
  void setTracer(Tracer *) override {}

private:
  int64_t slots_;
  std::vector<float> outs_;
  Batch slot_[2];
  int next_ = 0;
};

} // namespace

// --eval-every stages the evaluation's batches into the batch slots the
// training steps use: every step after it still trains on its own batch of
// the training set, the batches of the run without evaluation (a device
// executor's two slots, with outputs read every step and every 3 steps).
TEST(TrainingLoop, AnEvaluationBetweenStepsLeavesTheNextStepItsBatch) {
  for (int64_t slots : {1, 3}) {
    std::vector<std::vector<int64_t>> plain; // the samples of each step
    for (int64_t evalEvery : {0, 1, 2, 3}) {
      SCOPED_TRACE(fmt::format("slots {}, --eval-every {}", slots, evalEvery));
      Fixture f(/*epochs=*/2, 1, 0, /*testSize=*/40); // 3 batches: both slots
      TwoSlotRecorder rec(slots, f.spec.numOutputs);
      f.config.evalEvery = evalEvery;
      TrainingLoop loop(*f.session, rec, f.config, {&f.recorder});
      loop.run(RunStart());
      ASSERT_EQ(rec.trained.size(), 8u);
      std::vector<std::vector<int64_t>> samples;
      for (const TwoSlotRecorder::Batch &b : rec.trained) {
        EXPECT_EQ(b.ds, &f.session->data.train); // (each fixture has its own)
        samples.push_back(b.idx);
      }
      if (evalEvery == 0)
        plain = samples;
      else
        EXPECT_EQ(samples, plain);
      // 3 batches of the 40 test samples per evaluation: every evalEvery
      // steps and at the 2 epochs' ends.
      EXPECT_EQ(rec.evaluated, 3 * ((evalEvery ? 8 / evalEvery : 0) + 2));
    }
  }
}

// On the CPU executor (one batch buffer): the losses of every step and the
// parameters after training are the same with an evaluation after every
// step as without.
TEST(TrainingLoop, EvaluatingBetweenStepsChangesNoLossAndNoParameter) {
  Fixture plain(/*epochs=*/2);
  plain.run();
  for (double validation : {0.0, 0.2}) {
    SCOPED_TRACE(fmt::format("validation {}", validation));
    Fixture a(/*epochs=*/2, 1, validation, 40), b(/*epochs=*/2, 1, validation, 40);
    b.config.evalEvery = 1;
    a.run();
    b.run();
    EXPECT_EQ(a.recorder.local, b.recorder.local);
    ASSERT_EQ(a.session->persistent.size(), b.session->persistent.size());
    EXPECT_EQ(std::memcmp(a.session->persistent.data(), b.session->persistent.data(),
                          a.session->persistent.size()),
              0);
    if (validation == 0)
      EXPECT_EQ(a.recorder.local, plain.recorder.local);
  }
}
