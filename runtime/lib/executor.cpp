//===- executor.cpp - The CPU executor, the device backend registry ------===//
#include "executor.h"

#include "session.h"
#include "tracer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace dtc::rt {
namespace {

// CPU steps are synchronous: a batch is gathered when staged (the step
// before it has finished), outputs are read after every step, and the
// parameters live in Session::persistent.
class CpuExecutor final : public Executor {
public:
  explicit CpuExecutor(Session &s) : s_(s) {}

  std::string describe() const override { return "cpu"; }
  int64_t outputSlots() const override { return 1; }

  int stage(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t draw) override {
    s_.loadBatch(ds, idx, n, draw);
    return 0;
  }
  void train(int, int64_t, float gradSeed) override {
    s_.args.gradSeed = gradSeed;
    s_.spec.trainStep(s_.args);
  }
  void eval(int, int64_t) override { s_.spec.evalStep(s_.args); }
  void grad(int, float *grads) override {
    s_.args.gradSeed = 1.0f; // this process's own gradient
    s_.args.paramGrads = grads;
    s_.spec.gradStep(s_.args);
    s_.args.paramGrads = nullptr;
  }
  void readOutputs(int64_t count, float *out) override {
    if (count > 1)
      throw Error("internal error: the CPU executor has one output slot");
    std::copy(s_.outputs.begin(), s_.outputs.end(), out);
  }
  void setParam(int64_t offset, float value) override {
    std::memcpy(s_.persistent.data() + offset, &value, sizeof value);
  }
  void persistentToHost() override {}
  void shareBuffers() override {
    if (s_.comm.size() > 1 && s_.spec.bufferBytes > 0)
      s_.comm.broadcast(s_.persistent.data() + s_.spec.paramBytes, s_.spec.bufferBytes, 0);
  }
  void setTracer(Tracer *t) override { s_.args.trace = t; }

private:
  Session &s_;
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
