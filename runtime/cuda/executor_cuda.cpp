//===- executor_cuda.cpp - CUDA steps: device memory, staging, outputs ---===//
//
// The CUDA executor (executor.h) and the backend libdtcrt_cuda registers
// with the runtime (enableCuda, run by including dtc/cuda.h).
//
// Memory, allocated once: the persistent block (parameters uploaded from the
// host's initialization, optimizer state zero), the arena (arenaFixed +
// arenaPerSample * batch + 64), one output slot per step of a logging
// interval, and two batch slots, each a pinned host buffer and a device
// buffer.
//
// Staging: stage() gathers a batch into the pinned buffer of the slot not
// used by the previous stage, after the host has made sure that the
// previous copy out of it finished (event `copied`), and queues its
// host-to-device copy on the copy stream after the last step that read the
// slot's device buffer (event `consumed`). A step makes the compute stream
// wait for its slot's `copied` event. The driver stages batch k+1 right
// after queuing step k, so the copy overlaps step k.
//
// Outputs: step k writes its loss and metrics to output slot k of the
// interval; readOutputs copies the slots down once per interval (pinned),
// the only point where the host waits for the device during training.
// With NCCL over several ranks the host never blocks without a deadline:
// every wait polls the device and ends the job (ncclCommAbort, _exit) when
// no step has finished within --comm-timeout, naming the all-reduce that
// did not complete.
//
//===----------------------------------------------------------------------===//
#include "dtc/cuda.h"

#include "cuda_util.h"
#include "device_comm.h"
#include "train/executor.h"
#include "checkpoint/params.h"
#include "train/session.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

namespace dtc::rt {

std::string cudaMessage(cudaError_t e) {
  return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

void cudaCheck(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return;
  cudaGetLastError(); // clear a non-sticky error
  throw Error(fmt::format("{}: {}", what, cudaMessage(e)));
}

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kBlasWorkspace = size_t(32) << 20; // cuBLAS on Hopper asks for 32 MiB

void *deviceAlloc(size_t bytes, const char *what, int device) {
  void *p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 64));
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(fmt::format("cannot allocate {:.1f} MiB for the {} on cuda:{}: {}",
                            double(bytes) / double(1 << 20), what, device, cudaMessage(e)));
  }
  return p;
}

void *pinnedAlloc(size_t bytes, const char *what) {
  void *p = nullptr;
  const cudaError_t e = cudaMallocHost(&p, std::max<size_t>(bytes, 64));
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(fmt::format("cannot allocate {:.1f} MiB of pinned host memory for the {}: {}",
                            double(bytes) / double(1 << 20), what, cudaMessage(e)));
  }
  return p;
}

cudaEvent_t newEvent() {
  cudaEvent_t e = nullptr;
  cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  return e;
}

class CudaExecutor final : public Executor {
public:
  CudaExecutor(Session &s, DeviceComm &comm) : s_(s), comm_(comm), device_(comm.device()) {
    const ModelSpec &spec = s.spec;
    const Options &o = s.opts;
    cudaCheck(cudaSetDevice(device_), "cudaSetDevice");
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    name_ = prop.name;
    cudaCheck(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking), "cudaStreamCreate");
    cudaCheck(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "cudaStreamCreate");
    if (cublasCreate(&blas_) != CUBLAS_STATUS_SUCCESS)
      throw Error(fmt::format("cannot create a cuBLAS handle on cuda:{}", device_));
    blasWorkspace_ = deviceAlloc(kBlasWorkspace, "cuBLAS workspace", device_);
    if (cublasSetStream(blas_, compute_) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(blas_, blasWorkspace_, kBlasWorkspace) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(blas_, o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) !=
            CUBLAS_STATUS_SUCCESS)
      throw Error("cannot configure the cuBLAS handle");
    ctx_ = DeviceContext{compute_, blas_, device_};

    // Parameters as initialized (and broadcast) on the host; state zero.
    persistent_ = static_cast<char *>(
        deviceAlloc(size_t(spec.persistentBytes), "parameters and optimizer state", device_));
    cudaCheck(cudaMemcpy(persistent_, s.persistent.data(), size_t(spec.persistentBytes),
                         cudaMemcpyHostToDevice),
              "uploading the parameters");
    const size_t arenaSize = size_t(arenaBytes(spec, o.batch, o.gradcheck));
    arena_ = static_cast<char *>(deviceAlloc(arenaSize, "step arena", device_));
    cudaCheck(cudaMemsetAsync(arena_, 0, arenaSize, compute_), "cudaMemsetAsync");

    // A logging interval's optimizer steps, each with its micro-batches.
    slots_ = std::max<int64_t>(1, o.logInterval) * std::max<int64_t>(1, o.accumulate);
    numOutputs_ = spec.numOutputs;
    const size_t outBytes = size_t(slots_ * numOutputs_) * sizeof(float);
    outputs_ = static_cast<float *>(deviceAlloc(outBytes, "step outputs", device_));
    cudaCheck(cudaMemsetAsync(outputs_, 0, outBytes, compute_), "cudaMemsetAsync");
    hostOutputs_ = static_cast<float *>(pinnedAlloc(outBytes, "step outputs"));
    stepDone_.resize(size_t(slots_));
    for (cudaEvent_t &e : stepDone_)
      e = newEvent();
    sync_ = newEvent();
    paramWritten_ = newEvent();
    hostParam_ = static_cast<float *>(pinnedAlloc(sizeof(float), "parameter updates"));

    const Dataset &like = s.data.train;
    features_ = like.features;
    labelWidth_ = like.labelWidth;
    classLabels_ = like.labelKind == LabelKind::Class;
    capacity_ = o.batch;
    const size_t xBytes = size_t(capacity_ * features_) * sizeof(float);
    const size_t yBytes = size_t(capacity_ * labelWidth_) * 4; // int32 or float
    for (Slot &sl : batches_) {
      sl.hostX = static_cast<float *>(pinnedAlloc(xBytes, "batch staging"));
      sl.hostY = pinnedAlloc(yBytes, "batch staging");
      sl.x = static_cast<float *>(deviceAlloc(xBytes, "batches", device_));
      sl.y = deviceAlloc(yBytes, "batches", device_);
      sl.copied = newEvent();
      sl.consumed = newEvent();
    }

    comm_.setComputeStream(compute_);
    args_.persistent = persistent_;
    args_.arena = arena_;
    args_.hyper = &s.hyper;
    args_.paramGrads = nullptr;
    args_.comm = &s.comm;
    args_.carried = s.carried.data();
    args_.gradSeed = 1.0f;
    args_.trace = nullptr;
    args_.device = &ctx_;
    // The uploads (legacy stream) and memsets are done before any step: the
    // compute and copy streams do not synchronize with the legacy stream.
    cudaCheck(cudaDeviceSynchronize(), "initializing the device");
  }

  ~CudaExecutor() override {
    // Unwinding from an error with ranks that may be stuck in NCCL: leave
    // the device alone (waiting could hang); the process is about to _exit.
    if (std::uncaught_exceptions() > 0 && comm_.canHang())
      return;
    cudaStreamSynchronize(compute_);
    cudaStreamSynchronize(copy_);
    comm_.setComputeStream(nullptr);
    for (Slot &sl : batches_) {
      cudaFreeHost(sl.hostX);
      cudaFreeHost(sl.hostY);
      cudaFree(sl.x);
      cudaFree(sl.y);
      cudaEventDestroy(sl.copied);
      cudaEventDestroy(sl.consumed);
    }
    for (cudaEvent_t e : stepDone_)
      cudaEventDestroy(e);
    cudaEventDestroy(sync_);
    cudaEventDestroy(paramWritten_);
    cudaFreeHost(hostParam_);
    cudaFreeHost(hostOutputs_);
    cudaFree(outputs_);
    cudaFree(grads_);
    cudaFree(arena_);
    cudaFree(persistent_);
    if (blas_)
      cublasDestroy(blas_);
    cudaFree(blasWorkspace_);
    cudaStreamDestroy(copy_);
    cudaStreamDestroy(compute_);
  }

  std::string describe() const override { return fmt::format("cuda:{} ({})", device_, name_); }
  int64_t outputSlots() const override { return slots_; }

  int stage(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t draw) override {
    if (n > capacity_ || n < 0 || ds.features != features_ || ds.labelWidth != labelWidth_ ||
        (ds.labelKind == LabelKind::Class) != classLabels_)
      throw Error("internal error: batch does not fit its buffer");
    const int handle = next_;
    next_ ^= 1;
    Slot &sl = batches_[handle];
    hostWait(sl.copied, "staging a batch"); // the previous copy out of sl.hostX
    gatherBatch(ds, idx, n, sl.hostX, sl.hostY, draw);
    cudaCheck(cudaStreamWaitEvent(copy_, sl.consumed, 0), "cudaStreamWaitEvent");
    if (n > 0) {
      cudaCheck(cudaMemcpyAsync(sl.x, sl.hostX, size_t(n * features_) * sizeof(float),
                                cudaMemcpyHostToDevice, copy_),
                "copying a batch to the device");
      cudaCheck(cudaMemcpyAsync(sl.y, sl.hostY, size_t(n * labelWidth_) * 4,
                                cudaMemcpyHostToDevice, copy_),
                "copying a batch to the device");
    }
    cudaCheck(cudaEventRecord(sl.copied, copy_), "cudaEventRecord");
    sl.n = n;
    return handle;
  }

  void train(int batch, int64_t outSlot, float gradSeed) override {
    run(s_.spec.trainStepCuda, batch, outSlot, gradSeed, nullptr);
  }
  void accumulate(int batch, int64_t outSlot, float gradSeed) override {
    if (!s_.spec.accumulateStepCuda)
      throw Error(fmt::format("model '{}' has no CUDA accumulation step", s_.spec.name));
    run(s_.spec.accumulateStepCuda, batch, outSlot, gradSeed, nullptr);
  }
  void eval(int batch, int64_t outSlot) override {
    run(s_.spec.evalStepCuda, batch, outSlot, 1.0f, nullptr);
  }
  void grad(int batch, float *grads) override {
    if (!s_.spec.gradStepCuda)
      throw Error(fmt::format("model '{}' has no CUDA gradient step; run --gradcheck with "
                              "--device cpu",
                              s_.spec.name));
    const size_t bytes = size_t(countParams(s_.spec)) * sizeof(float);
    if (!grads_) { // the gradient check only
      grads_ = static_cast<float *>(deviceAlloc(bytes, "gradients", device_));
      cudaCheck(cudaMemsetAsync(grads_, 0, bytes, compute_), "cudaMemsetAsync");
    }
    run(s_.spec.gradStepCuda, batch, 0, 1.0f, grads_);
    cudaCheck(cudaEventRecord(sync_, compute_), "cudaEventRecord");
    hostWait(sync_, "the gradient step");
    checkRanges();
    cudaCheck(cudaMemcpy(grads, grads_, bytes, cudaMemcpyDeviceToHost), "copying gradients");
    queued_ = 0;
  }

  void readOutputs(int64_t count, float *out) override {
    if (count < 0 || count > slots_)
      throw Error("internal error: more outputs than slots");
    const size_t bytes = size_t(count * numOutputs_) * sizeof(float);
    if (bytes > 0)
      cudaCheck(cudaMemcpyAsync(hostOutputs_, outputs_, bytes, cudaMemcpyDeviceToHost, compute_),
                "copying the outputs");
    cudaCheck(cudaEventRecord(sync_, compute_), "cudaEventRecord");
    hostWait(sync_, "the steps");
    checkRanges();
    std::memcpy(out, hostOutputs_, bytes);
    queued_ = 0;
  }

  // A label or id outside its range that a kernel of the steps met: the
  // CPU kernel's error (kernels/kernels.cu records it where the CPU stops).
  void checkRanges() {
    if (std::string fault = takeRangeFault(compute_); !fault.empty())
      throw Error(fault);
  }

  void setParam(int64_t offset, float value) override {
    hostWait(paramWritten_, "a parameter update"); // hostParam_ is free again
    *hostParam_ = value;
    cudaCheck(cudaMemcpyAsync(persistent_ + offset, hostParam_, sizeof(float),
                              cudaMemcpyHostToDevice, compute_),
              "writing a parameter");
    cudaCheck(cudaEventRecord(paramWritten_, compute_), "cudaEventRecord");
  }

  void persistentToHost() override {
    s_.finishCarried(); // (the compute stream waits for them)
    cudaCheck(cudaEventRecord(sync_, compute_), "cudaEventRecord");
    hostWait(sync_, "the steps");
    cudaCheck(cudaMemcpy(s_.persistent.data(), persistent_, size_t(s_.spec.persistentBytes),
                         cudaMemcpyDeviceToHost),
              "copying the parameters and optimizer state to the host");
  }

  void shareBuffers() override {
    const int64_t at = s_.spec.paramBytes, bytes = s_.spec.bufferBytes;
    if (s_.comm.size() < 2 || bytes == 0)
      return;
    cudaCheck(cudaEventRecord(sync_, compute_), "cudaEventRecord");
    hostWait(sync_, "the steps");
    char *host = s_.persistent.data() + at;
    cudaCheck(cudaMemcpy(host, persistent_ + at, size_t(bytes), cudaMemcpyDeviceToHost),
              "copying the buffers to the host");
    s_.comm.broadcast(host, bytes, 0);
    // On the compute stream, which does not synchronize with the legacy
    // stream of a plain cudaMemcpy: the next step reads the buffers there.
    // The host waits for the copy, as the source is pageable memory.
    cudaCheck(cudaMemcpyAsync(persistent_ + at, host, size_t(bytes), cudaMemcpyHostToDevice,
                              compute_),
              "copying the buffers to the device");
    cudaCheck(cudaEventRecord(sync_, compute_), "cudaEventRecord");
    hostWait(sync_, "copying the buffers to the device");
  }

  void setTracer(Tracer *t) override { args_.trace = t; }

private:
  struct Slot {
    float *hostX = nullptr, *x = nullptr;
    void *hostY = nullptr, *y = nullptr;
    int64_t n = 0;
    cudaEvent_t copied = nullptr, consumed = nullptr;
  };

  void run(StepFn step, int batch, int64_t outSlot, float gradSeed, float *paramGrads) {
    if (batch < 0 || batch > 1 || outSlot < 0 || outSlot >= slots_)
      throw Error("internal error: bad batch or output slot");
    Slot &sl = batches_[batch];
    cudaCheck(cudaStreamWaitEvent(compute_, sl.copied, 0), "cudaStreamWaitEvent");
    args_.batch = sl.n;
    const bool ids = s_.spec.inputType == ElementType::I32;
    args_.x = ids ? nullptr : sl.x;
    args_.xIds = ids ? reinterpret_cast<const int32_t *>(sl.x) : nullptr;
    args_.yClass = classLabels_ ? static_cast<const int32_t *>(sl.y) : nullptr;
    args_.yValue = classLabels_ ? nullptr : static_cast<const float *>(sl.y);
    args_.outputs = outputs_ + outSlot * numOutputs_;
    args_.gradSeed = gradSeed;
    args_.rngSeed = s_.args.rngSeed; // the training loop's, for this step
    args_.paramGrads = paramGrads;
    step(args_);
    args_.paramGrads = nullptr;
    cudaCheck(cudaEventRecord(sl.consumed, compute_), "cudaEventRecord");
    cudaCheck(cudaEventRecord(stepDone_[size_t(outSlot)], compute_), "cudaEventRecord");
    queued_ = std::max(queued_, outSlot + 1);
  }

  // Waits until `event` has completed. When a step can wait forever on
  // another rank (NCCL), polls instead of blocking, and ends the job when no
  // queued step has finished within --comm-timeout.
  void hostWait(cudaEvent_t event, const char *what) {
    if (!comm_.canHang()) {
      const cudaError_t e = cudaEventSynchronize(event);
      if (e != cudaSuccess)
        deviceFailed(e, what);
      return;
    }
    const auto timeout = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(comm_.timeoutSeconds()));
    auto lastProgress = Clock::now(), lastErrorCheck = lastProgress;
    int64_t finished = finishedSteps();
    auto pause = std::chrono::microseconds(20);
    for (;;) {
      const cudaError_t q = cudaEventQuery(event);
      if (q == cudaSuccess)
        return;
      if (q != cudaErrorNotReady)
        deviceFailed(q, what);
      const int64_t now = finishedSteps();
      if (now != finished) {
        finished = now;
        lastProgress = Clock::now();
      }
      // A peer's failure shows as an NCCL error long before the timeout.
      if (Clock::now() - lastErrorCheck > std::chrono::milliseconds(100)) {
        lastErrorCheck = Clock::now();
        if (std::string error = comm_.asyncError(); !error.empty())
          comm_.abortJob(error);
      }
      if (Clock::now() - lastProgress > timeout) {
        std::string stalled = comm_.stalled();
        if (stalled.rfind("NCCL error", 0) == 0)
          comm_.abortJob(stalled);
        comm_.abortJob(fmt::format(
            "{} did not complete within {:g} s; another rank may have died or stopped",
            stalled.empty() ? std::string("a step on cuda:") + std::to_string(device_) : stalled,
            comm_.timeoutSeconds()));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

  int64_t finishedSteps() {
    int64_t n = 0;
    for (int64_t k = 0; k < queued_; ++k)
      n += cudaEventQuery(stepDone_[size_t(k)]) == cudaSuccess;
    cudaGetLastError(); // cudaErrorNotReady is not an error
    return n;
  }

  [[noreturn]] void deviceFailed(cudaError_t e, const char *what) {
    cudaGetLastError();
    throw Error(fmt::format("CUDA error in {} on cuda:{}: {} (a kernel failed; this is a bug "
                            "in dtc or its runtime{})",
                            what, device_, cudaMessage(e),
                            isKernelFault(e) ? "; rerun with CUDA_LAUNCH_BLOCKING=1 to name the "
                                               "kernel that faulted"
                                             : ""));
  }

  Session &s_;
  DeviceComm &comm_;
  int device_;
  std::string name_;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void *blasWorkspace_ = nullptr;
  DeviceContext ctx_{};
  char *persistent_ = nullptr, *arena_ = nullptr;
  float *outputs_ = nullptr, *hostOutputs_ = nullptr, *grads_ = nullptr, *hostParam_ = nullptr;
  int64_t slots_ = 1, numOutputs_ = 1, queued_ = 0;
  std::vector<cudaEvent_t> stepDone_;
  cudaEvent_t sync_ = nullptr, paramWritten_ = nullptr;
  int64_t features_ = 0, labelWidth_ = 1, capacity_ = 0;
  bool classLabels_ = true;
  Slot batches_[2];
  int next_ = 0;
  StepArgs args_{};
};

class CudaBackend final : public DeviceBackend {
public:
  const char *name() const override { return "cuda"; }

  int deviceCount(std::string *why) override {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      *why = fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(e));
      return 0;
    }
    if (n < 1)
      *why = "cudaGetDeviceCount: 0 devices";
    return n;
  }

  void preselectDevice(int localRank) override {
    int n = 0;
    if (localRank >= 0 && cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
      cudaSetDevice(localRank % n); // best effort: createCommunicator checks
    cudaGetLastError();
  }

  std::unique_ptr<CommBase> createCommunicator(std::unique_ptr<CommBase> base, bool nccl,
                                               const LaunchInfo &launch,
                                               const Options &opts) override {
    return createDeviceCommunicator(std::move(base), nccl, launch, opts);
  }

  std::unique_ptr<Executor> createExecutor(Session &s) override {
    auto *comm = dynamic_cast<DeviceComm *>(&s.comm);
    if (!comm)
      throw Error("internal error: a CUDA run without a device communicator");
    return std::make_unique<CudaExecutor>(s, *comm);
  }
};

} // namespace

void enableCuda() {
  static CudaBackend backend;
  registerDeviceBackend(&backend);
}

} // namespace dtc::rt
