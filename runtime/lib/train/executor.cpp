//===- executor.cpp - The CPU executor, the device backend registry ------===//
#include "train/executor.h"

#include "train/session.h"
#include "support/tracer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace dtc::rt {
namespace {

// CPU steps are synchronous: a batch is gathered when staged (the step
// before it has finished), outputs are read after every optimizer step (its
// micro-batches' in slots of their own), and the parameters live in
// Session::persistent.
class CpuExecutor final : public Executor {
public:
  explicit CpuExecutor(Session &s)
      : s_(s), slots_(std::max<int64_t>(1, s.opts.accumulate)),
        outs_(static_cast<size_t>(slots_ * s.spec.numOutputs), 0.0f) {}

  std::string describe() const override { return "cpu"; }
  int64_t outputSlots() const override { return slots_; }

  int stage(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t draw) override {
    s_.loadBatch(ds, idx, n, draw);
    return 0;
  }
  void train(int, int64_t outSlot, float gradSeed) override {
    s_.args.gradSeed = gradSeed;
    run(s_.spec.trainStep, outSlot);
  }
  void accumulate(int, int64_t outSlot, float gradSeed) override {
    if (!s_.spec.accumulateStep)
      throw Error("internal error: the model has no accumulation step");
    s_.args.gradSeed = gradSeed;
    run(s_.spec.accumulateStep, outSlot);
  }
  void eval(int, int64_t outSlot) override { run(s_.spec.evalStep, outSlot); }
  void grad(int, float *grads) override {
    s_.args.gradSeed = 1.0f; // this process's own gradient
    s_.args.paramGrads = grads;
    run(s_.spec.gradStep, 0);
    s_.args.paramGrads = nullptr;
  }
  void readOutputs(int64_t count, float *out) override {
    if (count > slots_)
      throw Error("internal error: more outputs read than the CPU executor has slots");
    std::copy(outs_.begin(), outs_.begin() + count * s_.spec.numOutputs, out);
  }
  void setParam(int64_t offset, float value) override {
    std::memcpy(s_.persistent.data() + offset, &value, sizeof value);
  }
  void persistentToHost() override { s_.finishCarried(); }
  void shareBuffers() override {
    if (s_.comm.size() > 1 && s_.spec.bufferBytes > 0)
      s_.comm.broadcast(s_.persistent.data() + s_.spec.paramBytes, s_.spec.bufferBytes, 0);
  }
  void setTracer(Tracer *t) override { s_.args.trace = t; }

private:
  void run(StepFn step, int64_t outSlot) {
    if (outSlot < 0 || outSlot >= slots_)
      throw Error("internal error: bad output slot");
    s_.args.outputs = outs_.data() + outSlot * s_.spec.numOutputs;
    step(s_.args);
    s_.args.outputs = s_.outputs.data();
  }

  Session &s_;
  const int64_t slots_;
  std::vector<float> outs_;
};

DeviceBackend *&backendSlot() {
  static DeviceBackend *backend = nullptr;
  return backend;
}

} // namespace

std::unique_ptr<Executor> makeCpuExecutor(Session &s) { return std::make_unique<CpuExecutor>(s); }

void registerDeviceBackend(DeviceBackend *backend) { backendSlot() = backend; }

DeviceBackend *deviceBackend() { return backendSlot(); }

DeviceChoice chooseDevice(const ModelSpec &spec, DeviceKind requested) {
  DeviceChoice c;
  if (requested == DeviceKind::Cpu)
    return c;
  const bool explicitCuda = requested == DeviceKind::Cuda;
  auto refuse = [&](const std::string &why) {
    if (explicitCuda)
      throw Error("--device cuda: " + why);
    c.note = why;
    return c;
  };
  if (!hasCudaSteps(spec)) {
    if (explicitCuda)
      throw Error(fmt::format("--device cuda: model '{}' was compiled without CUDA steps "
                              "(compile it with dtc --target=cuda)",
                              spec.name));
    return c; // a CPU program: nothing to say
  }
  DeviceBackend *backend = deviceBackend();
  if (!backend)
    return refuse("this program was not linked with the CUDA runtime (libdtcrt_cuda.a)");
  std::string why;
  if (backend->deviceCount(&why) < 1)
    return refuse(fmt::format("no CUDA device found ({})", why));
  c.cuda = true;
  return c;
}

} // namespace dtc::rt
