//===- executor.h - Where the compiled steps run: the CPU or a device ------===//
//
// The training loop, evaluation and the gradient check drive the steps
// through an Executor, so that they are the same for CPU steps (host memory,
// synchronous) and device steps (libdtcrt_cuda: device memory, batches
// staged ahead on a copy stream, outputs read back once per logging
// interval). The host-side state (data, parameters as initialized, options,
// communicator) stays in the Session.
//
// A device backend (DeviceBackend) is registered only by programs linked
// with libdtcrt_cuda.a (dtc::rt::enableCuda(), run by including dtc/cuda.h),
// so libdtcrt.a itself never depends on CUDA.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "comm/comm_impl.h"
#include "data/data.h"
#include "options/options.h"

#include <cstdint>
#include <memory>
#include <string>

namespace dtc::rt {

struct Session;
class Tracer;

class Executor {
public:
  virtual ~Executor() = default;

  // "cpu", "cuda:0 (NVIDIA H200)": for the header line.
  virtual std::string describe() const = 0;
  // Output slots: train/eval steps write their outputs (loss, metrics) to
  // slot `outSlot` < outputSlots(), read back together by readOutputs. On
  // the CPU one per micro-batch of an optimizer step (--accumulate; 1
  // without), read after every optimizer step; at least as many on a device.
  virtual int64_t outputSlots() const = 0;

  // Copies samples idx[0..n) of ds into a batch slot and returns it (idx is
  // read before stage returns; draw: a text's random windows, gatherBatch's). There are two slots, used in turn: staging
  // a batch while the step on the other one runs overlaps the copy with the
  // step on a device; a handle is valid until the second stage after it.
  virtual int stage(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t draw = 0) = 0;
  // trainStep on staged batch `batch`, outputs to slot `outSlot`.
  virtual void train(int batch, int64_t outSlot, float gradSeed) = 0;
  // accumulateStep (gradient accumulation: a micro-batch before an
  // optimizer step's last) on staged batch `batch`, outputs to `outSlot`.
  virtual void accumulate(int batch, int64_t outSlot, float gradSeed) = 0;
  // evalStep on staged batch `batch`, outputs to slot `outSlot`.
  virtual void eval(int batch, int64_t outSlot) = 0;
  // gradStep on staged batch `batch` (outputs to slot 0); the gradients,
  // packed in parameter order, are copied to grads (host memory). Waits.
  virtual void grad(int batch, float *grads) = 0;
  // Waits for the steps queued so far and copies output slots [0, count) to
  // out[count * numOutputs].
  virtual void readOutputs(int64_t count, float *out) = 0;

  // Sets the float at byte offset `offset` of the parameters (gradient check).
  virtual void setParam(int64_t offset, float value) = 0;
  // Makes Session::persistent (parameters and optimizer state) that of the
  // steps (--save, --checkpoint). Waits for the steps queued so far.
  virtual void persistentToHost() = 0;
  // Makes every rank's buffers (batch normalization's running statistics,
  // which each rank updates from its own batches) rank 0's, as DDP's
  // broadcast_buffers does: before an evaluation, so that every rank's part
  // of it uses the statistics the checkpoint holds. Waits for the steps
  // queued so far.
  virtual void shareBuffers() = 0;
  // Records the ops of the next steps into t (null: stop).
  virtual void setTracer(Tracer *t) = 0;
};

// The CPU steps of s.spec on s's host buffers.
std::unique_ptr<Executor> makeCpuExecutor(Session &s);

// A device implementation of the steps (libdtcrt_cuda).
class DeviceBackend {
public:
  virtual ~DeviceBackend() = default;
  virtual const char *name() const = 0; // "cuda"
  // Devices this process can use; 0 with *why set, e.g.
  // "cudaGetDeviceCount: no CUDA-capable device is detected".
  virtual int deviceCount(std::string *why) = 0;
  // Makes device (localRank modulo the device count) current before MPI
  // starts: a CUDA-aware MPI would otherwise create a context on device 0
  // in every rank.
  virtual void preselectDevice(int localRank) { (void)localRank; }
  // Selects this rank's device (local rank modulo the device count) and
  // makes the device communicator from `base` (local, or mpi when started
  // by an MPI launcher): with nccl false, a one-rank communicator whose
  // all-reduces do nothing; with nccl true, NCCL, bootstrapped
  // through `base` when it is mpi, else through torchrun's variables
  // (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), else one rank.
  virtual std::unique_ptr<CommBase> createCommunicator(std::unique_ptr<CommBase> base, bool nccl,
                                                       const LaunchInfo &launch,
                                                       const Options &opts) = 0;
  // The device steps of s.spec (s.comm made by createCommunicator).
  virtual std::unique_ptr<Executor> createExecutor(Session &s) = 0;
};

// Called by libdtcrt_cuda (enableCuda); the backend lives as long as the process.
void registerDeviceBackend(DeviceBackend *backend);
DeviceBackend *deviceBackend(); // null unless registered

inline bool hasCudaSteps(const ModelSpec &spec) {
  return spec.trainStepCuda != nullptr && spec.evalStepCuda != nullptr;
}

// The device a run uses: --device cuda (errors unless the program has CUDA
// steps, was linked with the CUDA runtime and a device is present), cpu, or
// auto (cuda when all of that holds, else cpu, with the reason in `note`).
struct DeviceChoice {
  bool cuda = false;
  std::string note; // why auto chose the CPU for a program with CUDA steps
};
DeviceChoice chooseDevice(const ModelSpec &spec, DeviceKind requested);

} // namespace dtc::rt
