//===- cuda.h - The contract between generated CUDA code and the runtime --===//
//
// A program dtc generates for --target=cuda holds the CPU steps (as for
// --target=cpu) and CUDA steps; the runtime picks the device at run time
// (train --device auto|cpu|cuda). The CUDA steps receive, through
// StepArgs::device, a DeviceContext: the compute stream every kernel and GEMM
// of the step runs on, the cuBLAS handle bound to it, and device scratch.
// All StepArgs pointers (x, labels, persistent, arena, outputs, paramGrads)
// are device pointers for CUDA steps. A CUDA step never synchronizes with the
// host: the runtime reads outputs once per logging interval.
//
// Collectives from CUDA steps go through the same Communicator (comm.h); a
// device-aware backend (NCCL) orders each bucket collective
// (allreduceStart, reduceScatterStart, allgatherStart) after the work
// already queued on the compute stream (an event), runs it on its own
// stream, and makes wait() order the compute stream after it (an event)
// without blocking the host.
//
// The device kernels below are the CUDA twins of kernels.h, with the same
// names and, after the context, the same parameters (kernels.h says what
// each computes); every one is asynchronous on `stream`, allocates nothing
// and never waits for the device. Shape and permutation arrays are host
// arrays (rank <= 6); every other pointer is a device pointer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"

#include <cstdint>

typedef struct CUstream_st *cudaStream_t;
typedef struct cublasContext *cublasHandle_t;

namespace dtc::rt {

struct DeviceContext {
  cudaStream_t stream;   // the compute stream
  cublasHandle_t blas;   // bound to `stream`
  int device;            // CUDA device ordinal
};

// Registers libdtcrt_cuda's device backend with the runtime, so that
// `train --device auto|cuda` can run the CUDA steps (libdtcrt.a alone never
// depends on CUDA). Including this header does it before main (below);
// calling it again, e.g. explicitly before runMain, is harmless.
void enableCuda();
namespace detail {
inline const bool kCudaEnabled = (enableCuda(), true);
} // namespace detail

} // namespace dtc::rt

namespace dtc::cuda {

// The launch shape of the grid-stride kernels, libdtcrt_cuda's and those
// dtc generates (Emit.cpp prints gridFor(n) and kThreads): 256 threads a
// block, at most 4096 blocks (the loops stride over the rest).
inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = 4096;
// Blocks for a grid-stride loop over n items, `threads` a block: at least 1.
constexpr unsigned gridFor(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < 1 ? 1 : blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

// The device kernels: the CUDA twins of kernels.h's, their declarations
// generated from the same dtcrt ops (dtc/kernels_abi.inc; the ops' CPU-only
// kernels, batchNormGradMaxPool, have none). How they compute where it
// differs from the CPU's:
// - Losses and metrics write their scalar to device memory `out`; the
//   gradients read `dloss` (one float) from device memory. A class label
//   or id outside its range (the data sets are checked when loaded) is read
//   clamped and recorded: the executor stops with the CPU kernel's error
//   when it reads the outputs.
// - crossEntropy and sumSquares: a warp per row (or a grid-stride loop),
//   the blocks' sums (double) added by a second pass in a fixed order (the
//   same result on every run).
// - attention: a warp per query row, the scores never stored; its gradient
//   a warp per query row (dq) and one per key row (dk, dv), without atomics.
// - embeddingGrad: each element of the table adds its id's rows in row
//   order, as the CPU kernel (the same floats, no atomics), the elements
//   spread over the grid by column and group of ids.
// - batchNorm: one block per channel for the statistics; lanes must be 1
//   (the blocked layout is the CPU's).
// - conv2d and its gradients: im2col + cuBLAS per sample; cols is device
//   scratch.
// - The optimizer updates (sgdUpdate, adamUpdate, sgdApplyMomentum): one
//   kernel launch per 32 items; `items` is a host array (read before the
//   call returns), the pointers in it device pointers; gradScale a device
//   pointer or null. momentumAccumulate: a grid-stride kernel, or a copy of
//   g when share == 0.
#define DTC_ABI_CONTEXT rt::DeviceContext
#define DTC_ABI_CPU 0
#include "dtc/kernels_abi.inc"
#undef DTC_ABI_CPU
#undef DTC_ABI_CONTEXT

// Ends the program with the CUDA error (naming `kernel`) if the last launch
// on this thread failed; generated code calls it after its own kernels.
// CUDA only (no twin in kernels.h).
void launched(const char *kernel);

} // namespace dtc::cuda
