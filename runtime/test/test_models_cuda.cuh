//===- test_models_cuda.cuh - test_models.h's models with CUDA steps ------===//
//
// What dtc --target=cuda generates for the linear models of test_models.h:
// the CPU steps of Linear<> plus CUDA steps written against dtc/cuda.h (and
// one elementwise kernel of their own, as generated code has), on device
// pointers and the context's stream, never synchronizing.
//
// Arena of the CUDA steps, fixed region first: the gradients (the buckets,
// numel floats), the constant 1 the loss gradient starts from (64 bytes),
// then per sample out [C], dout [C] at arena + fixedBytes. ModelSpec's
// arenaFixed is the larger of the CPU and CUDA steps' fixed regions.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/cuda.h"
#include "test_models.h"

#include <algorithm>

namespace dtc::test {

__global__ void biasAddKernel(float *out, const float *b, int64_t rows, int64_t C) {
  const int64_t n = rows * C;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] += b[i % C];
}

template <int64_t F, int64_t C, bool Regression, bool SplitBuckets = false>
struct LinearCuda {
  using Cpu = Linear<F, C, Regression, 0, SplitBuckets>;
  static constexpr int64_t numel = Cpu::numel;
  static constexpr int64_t oneOff = Cpu::align(numel * 4);
  static constexpr int64_t fixedBytes = oneOff + 64;

  static float *W(const StepArgs &a) { return reinterpret_cast<float *>(a.persistent + Cpu::wOff); }
  static float *b(const StepArgs &a) { return reinterpret_cast<float *>(a.persistent + Cpu::bOff); }
  static float *one(const StepArgs &a) { return reinterpret_cast<float *>(a.arena + oneOff); }
  static float *out(const StepArgs &a) { return reinterpret_cast<float *>(a.arena + fixedBytes); }
  static float *dout(const StepArgs &a) { return out(a) + a.batch * C; }

  static void forward(const StepArgs &a) {
    const DeviceContext &c = *a.device;
    float *o = out(a);
    cuda::gemm(c, false, true, a.batch, C, F, 1.0f, a.x, W(a), 0.0f, o);
    const int64_t n = a.batch * C;
    // The launch shape generated code takes (dtc/cuda.h).
    biasAddKernel<<<cuda::gridFor(n), cuda::kThreads, 0, c.stream>>>(o, b(a), a.batch, C);
    cuda::launched("biasAdd");
    if (Regression) {
      cuda::mse(c, o, a.yValue, n, a.outputs);
    } else {
      cuda::crossEntropy(c, o, a.yClass, a.batch, C, -100, a.outputs);
      cuda::accuracy(c, o, a.yClass, a.batch, C, -100, a.outputs + 1);
    }
  }

  static void backward(const StepArgs &a, float *grads, Communicator *comm,
                       Request *requests = nullptr) {
    const DeviceContext &c = *a.device;
    cuda::fill(c, one(a), 1, a.gradSeed);
    if (Regression)
      cuda::mseGrad(c, out(a), a.yValue, a.batch * C, one(a), dout(a));
    else
      cuda::crossEntropyGrad(c, out(a), a.yClass, a.batch, C, -100, one(a), dout(a));
    const int64_t shape[2] = {a.batch, C}, bshape[1] = {C};
    cuda::sumTo(c, dout(a), 2, shape, grads + F * C, 1, bshape);
    if (comm && SplitBuckets)
      requests[0] = comm->allreduceStart(0, grads + F * C, C);
    cuda::gemm(c, true, false, C, F, a.batch, 1.0f, dout(a), a.x, 0.0f, grads);
    if (comm && SplitBuckets)
      requests[1] = comm->allreduceStart(1, grads, F * C);
    if (comm && !SplitBuckets)
      requests[0] = comm->allreduceStart(0, grads, numel);
  }

  static void evalStep(const StepArgs &a) { forward(a); }
  static void gradStep(const StepArgs &a) {
    forward(a);
    backward(a, a.paramGrads, nullptr);
  }
  static void trainStep(const StepArgs &a) {
    forward(a);
    float *g = reinterpret_cast<float *>(a.arena);
    Request requests[2];
    backward(a, g, a.comm, requests);
    for (int bucket = 0; bucket < (SplitBuckets ? 2 : 1); ++bucket)
      a.comm->wait(requests[bucket]);
    float *buf = reinterpret_cast<float *>(a.persistent + Cpu::paramBytes);
    const UpdateItem items[2] = {{W(a), g, buf, nullptr, F * C},
                                       {b(a), g + F * C, buf + F * C, nullptr, C}};
    cuda::sgdUpdate(*a.device, items, 2, *a.hyper, nullptr);
  }

  static ModelSpec spec() {
    ModelSpec s = Cpu::spec();
    s.arenaFixed = std::max<int64_t>(s.arenaFixed, fixedBytes);
    s.trainStepCuda = trainStep;
    s.evalStepCuda = evalStep;
    s.gradStepCuda = gradStep;
    s.fingerprint ^= 0xc0da000000000000ULL;
    return s;
  }
};

} // namespace dtc::test
