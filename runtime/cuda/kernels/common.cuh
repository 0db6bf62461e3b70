//===- common.cuh - Device helpers shared by libdtcrt_cuda's kernels ------===//
//
// What kernels.cu, conv.cu, norm.cu and attention.cu share (moved from the
// one kernels.cu they were): the launch check, the thread indices and the
// block and warp reductions. Internal linkage, as before: every file has its
// own copy. The range-fault record and the partial sums of the two-pass
// reductions are __device__ variables, one per file without separable
// compilation, so they stay in kernels.cu with every kernel that uses them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/cuda.h"

#include "cuda_util.h"
#include "support/error.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace dtc::cuda {
namespace {

constexpr int32_t kMaxRank = 6;
// kThreads, kMaxBlocks and gridFor: dtc/cuda.h (the generated kernels' too).

// Ends the process without running destructors (NCCL's threads may be
// waiting for this rank; the launcher ends the others).
[[noreturn]] void die() {
  std::fflush(nullptr);
  std::_Exit(1);
}

[[noreturn]] void fatal(const char *what) {
  std::fflush(stdout);
  std::fprintf(stderr, "train: error: internal error in CUDA kernel: %s\n", what);
  die();
}

// CUDA_LAUNCH_BLOCKING=1 (CUDA's own switch: every launch completes before
// it returns), read once.
bool launchBlocking() {
  static const bool blocking = [] {
    const char *v = std::getenv("CUDA_LAUNCH_BLOCKING");
    return v && std::strcmp(v, "1") == 0;
  }();
  return blocking;
}

// A launch fails for a bad configuration (a runtime bug) or a context broken
// by a kernel that faulted: that error is sticky and shows at whatever call
// comes next, a later launch included, so without CUDA_LAUNCH_BLOCKING=1 the
// kernel named is only the first launch after the fault. With it, the check
// also waits for the kernel, so that its own fault is named.
void checkLaunch(const char *kernel) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess && launchBlocking())
    e = cudaDeviceSynchronize();
  if (e == cudaSuccess)
    return;
  std::fflush(stdout);
  std::fprintf(stderr, "train: error: %s\n",
               rt::launchFailure(kernel, e, launchBlocking()).c_str());
  die();
}

__device__ inline int64_t globalThread() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t gridThreads() { return int64_t(gridDim.x) * blockDim.x; }

// std::max's rule (a NaN in x is ignored unless first).
__device__ inline float maxOf(float a, float b) { return a < b ? b : a; }

struct Add {
  template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return maxOf(a, b); }
};
struct Min {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a < b ? a : b; }
};

// Combines the TY values of each threadIdx.x column; every thread of the
// block must call it (it synchronizes). sm holds TX * TY values.
template <int TX, int TY, class T, class Op>
__device__ T reduceY(T v, Op op, T *sm) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  sm[ty * TX + tx] = v;
  __syncthreads();
#pragma unroll
  for (int s = TY / 2; s > 0; s >>= 1) {
    if (ty < s)
      sm[ty * TX + tx] = op(sm[ty * TX + tx], sm[(ty + s) * TX + tx]);
    __syncthreads();
  }
  const T r = sm[tx];
  __syncthreads(); // sm is reused
  return r;
}

template <class T> __device__ T warpSum(T v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ float warpMax(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    v = maxOf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Sums one double per warp (lane 0's) over the block; thread 0 gets it.
__device__ double blockSumOfWarps(double v, double *sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0)
    sm[warp] = v;
  __syncthreads();
  double total = 0;
  if (warp == 0) {
    total = lane < warps ? sm[lane] : 0.0;
    total = warpSum(total);
  }
  return total;
}

} // namespace
} // namespace dtc::cuda

