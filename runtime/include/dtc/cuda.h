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
// device-aware backend (NCCL) orders allreduceStart after the work already
// queued on the compute stream (an event), runs it on its own stream, and
// makes wait() order the compute stream after it (an event) without
// blocking the host.
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

// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major (as kernels.h).
void gemm(const rt::DeviceContext &c, bool transA, bool transB, int64_t M,
          int64_t N, int64_t K, float alpha, const float *A, const float *B,
          float beta, float *C);

// count such products stored one after another (as kernels.h).
void gemmBatched(const rt::DeviceContext &c, bool transA, bool transB,
                 int64_t count, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, const float *B, float beta, float *C);

void permute(const rt::DeviceContext &c, const float *x, float *y,
             int32_t rank, const int64_t *xShape, const int32_t *perm);
void reduceSum(const rt::DeviceContext &c, const float *x, float *y,
               int64_t outer, int64_t n, int64_t inner);
void reduceMax(const rt::DeviceContext &c, const float *x, float *y,
               int64_t outer, int64_t n, int64_t inner);
// reduceSum, then y *= 1/n.
void reduceMean(const rt::DeviceContext &c, const float *x, float *y,
                int64_t outer, int64_t n, int64_t inner);
void reduceMaxGrad(const rt::DeviceContext &c, const float *x, const float *y,
                   const float *dy, float *dx, int64_t outer, int64_t n,
                   int64_t inner);
void sumTo(const rt::DeviceContext &c, const float *x, int32_t xRank,
           const int64_t *xShape, float *y, int32_t yRank,
           const int64_t *yShape);
void softmax(const rt::DeviceContext &c, const float *x, float *y,
             int64_t outer, int64_t n, int64_t inner);
void logSoftmax(const rt::DeviceContext &c, const float *x, float *y,
                int64_t outer, int64_t n, int64_t inner);
void softmaxGrad(const rt::DeviceContext &c, const float *y, const float *dy,
                 float *dx, int64_t outer, int64_t n, int64_t inner);
void logSoftmaxGrad(const rt::DeviceContext &c, const float *y,
                    const float *dy, float *dx, int64_t outer, int64_t n,
                    int64_t inner);
// Losses and metrics write their scalar result to device memory `out`; the
// gradients read `dloss` (one float) from device memory. Rows whose label
// is `ignore` do not count (kernels.h). A class label outside [0, C) (the
// data sets are checked when loaded) is read clamped and recorded: the
// executor stops with the CPU kernel's error when it reads the outputs.
// crossEntropy: a warp per row over the grid, the blocks' sums (double)
// added by a second pass in a fixed order (the same result on every run).
void crossEntropy(const rt::DeviceContext &c, const float *logits,
                  const int32_t *labels, int64_t B, int64_t C, int64_t ignore, float *out);
void crossEntropyGrad(const rt::DeviceContext &c, const float *logits,
                      const int32_t *labels, int64_t B, int64_t C, int64_t ignore,
                      const float *dloss, float *dlogits);
void mse(const rt::DeviceContext &c, const float *p, const float *t, int64_t n,
         float *out);
void mseGrad(const rt::DeviceContext &c, const float *p, const float *t,
             int64_t n, const float *dloss, float *dp);
void accuracy(const rt::DeviceContext &c, const float *logits,
              const int32_t *labels, int64_t B, int64_t C, int64_t ignore, float *out);
// Scaled dot-product attention (kernels.h): a warp per query row, the
// scores never stored; the gradient a warp per query row (dq) and one per
// key row (dk, dv), without atomics.
void attention(const rt::DeviceContext &c, const float *q, const float *k, const float *v,
               float *out, float *lse, int64_t heads, int64_t group, int64_t qkRows,
               int64_t vRows, int64_t tq, int64_t tk, int64_t d, int64_t dv, bool causal,
               float scale);
void attentionGrad(const rt::DeviceContext &c, const float *q, const float *k, const float *v,
                   const float *out, const float *lse, const float *dout, float *dq, float *dk,
                   float *dvOut, int64_t heads, int64_t group, int64_t qkRows, int64_t vRows,
                   int64_t tq, int64_t tk, int64_t d, int64_t dv, bool causal, float scale);
void arange(const rt::DeviceContext &c, int32_t *x, int64_t n);
// Gradient clipping (kernels.h): the sum in double over the grid, the
// blocks' sums added by a second pass in a fixed order.
void sumSquares(const rt::DeviceContext &c, const float *x, int64_t n, float *acc);
void clipCoef(const rt::DeviceContext &c, const float *sumSquares, const rt::Hyper &h,
              float *coef);
// Embeddings (kernels.h); an id outside [0, num) is read clamped and
// recorded, as a label (above). The gradient: each element of the table
// adds its id's rows in row order, as the CPU kernel (the same floats, no
// atomics), the elements spread over the grid by column and group of ids.
void embedding(const rt::DeviceContext &c, const float *weight, const int32_t *ids,
               int64_t rows, int64_t num, int64_t dim, float *out);
void embeddingGrad(const rt::DeviceContext &c, const int32_t *ids, const float *dy,
                   int64_t rows, int64_t num, int64_t dim, float *dweight);
// Fills n floats with v; copies n floats (device to device).
void fill(const rt::DeviceContext &c, float *x, int64_t n, float v);
void copy(const rt::DeviceContext &c, float *dst, const float *src, int64_t n);
void copyRows(const rt::DeviceContext &c, const float *src, int64_t srcStride, float *dst,
              int64_t dstStride, int64_t rows, int64_t len);

// Gradient accumulation (kernels.h).
void accumulate(const rt::DeviceContext &c, float *acc, const float *g, int64_t n);
void takeAccumulated(const rt::DeviceContext &c, float *acc, const float *g, float *out,
                     int64_t n);

// The prediction rows (kernels.h; dst a device pointer or null).
void exportPrediction(const rt::DeviceContext &c, float *dst, const float *src, int64_t n);

// Dropout (kernels.h; the same masks).
void dropout(const rt::DeviceContext &c, const float *x, float *y, int64_t n, float p, uint64_t seed,
             int64_t salt);
void dropoutGrad(const rt::DeviceContext &c, const float *dy, float *dx, int64_t n, float p, uint64_t seed,
                 int64_t salt);

// Batch normalization (kernels.h): one block per channel for the statistics.
// lanes must be 1 (the blocked layout is the CPU's).
void batchNorm(const rt::DeviceContext &c, const float *x, const float *weight, const float *bias,
               float *y, float *mean, float *var, int64_t n, int64_t channels, int64_t inner,
               float eps, bool relu, int64_t lanes);
void batchNormGrad(const rt::DeviceContext &c, const float *x, const float *dy, const float *mean,
                   const float *var, const float *weight, const float *reluResult, float *dx,
                   float *dweight, float *dbias, int64_t n, int64_t channels, int64_t inner,
                   float eps, int64_t lanes);
void batchNormInference(const rt::DeviceContext &c, const float *x, const float *weight,
                        const float *bias, const float *mean, const float *var, float *y,
                        int64_t n, int64_t channels, int64_t inner, float eps, bool relu,
                        int64_t lanes);
void updateRunningStats(const rt::DeviceContext &c, const float *mean, const float *var,
                        float *runningMean, float *runningVar, int64_t *numBatchesTracked,
                        int64_t channels, int64_t count, float momentum);
void layerNorm(const rt::DeviceContext &c, const float *x, const float *weight, const float *bias,
               float *y, float *mean, float *rstd, int64_t rows, int64_t d, float eps);
void layerNormGrad(const rt::DeviceContext &c, const float *x, const float *dy, const float *mean,
                   const float *rstd, const float *weight, float *dx, float *dweight,
                   float *dbias, int64_t rows, int64_t d);

// Convolution and pooling (kernels.h): im2col + cuBLAS per sample; cols is device scratch.
void conv2d(const rt::DeviceContext &c, const float *x, const float *weight, const float *bias,
            float *y, float *cols, int64_t N, const int64_t *window);
void conv2dGradInput(const rt::DeviceContext &c, const float *dy, const float *weight, float *dx,
                     float *cols, int64_t N, const int64_t *window);
void conv2dGradWeight(const rt::DeviceContext &c, const float *x, const float *dy, float *dw,
                      float *dbias, float *cols, int64_t N, const int64_t *window);
void maxPool2d(const rt::DeviceContext &c, const float *x, float *y, int64_t N, const int64_t *window);
void maxPool2dGrad(const rt::DeviceContext &c, const float *x, const float *dy, float *dx, int64_t N,
                   const int64_t *window);
void avgPool2d(const rt::DeviceContext &c, const float *x, float *y, int64_t N, const int64_t *window,
               bool countIncludePad);
void avgPool2dGrad(const rt::DeviceContext &c, const float *dy, float *dx, int64_t N,
                   const int64_t *window, bool countIncludePad);

// Optimizer updates of one bucket: `count` parameters, each with its
// gradient and state, in one kernel launch per 32 items (as kernels.h).
// `items` is a host array (read before the call returns); the pointers in
// it are device pointers.
// gradScale: a device pointer, or null (as kernels.h).
void sgdUpdate(const rt::DeviceContext &c, const rt::UpdateItem *items,
               int32_t count, const rt::Hyper &h, const float *gradScale);
void adamUpdate(const rt::DeviceContext &c, const rt::UpdateItem *items,
                int32_t count, const rt::Hyper &h, const float *gradScale,
                bool decoupled);
// SGD momentum folded into the gradient buckets (as kernels.h;
// rt::momentumShare gives the share): a grid-stride kernel, or a copy of g
// when share == 0; sgdApplyMomentum is sgdUpdate with momentum and weight
// decay 0.
void momentumAccumulate(const rt::DeviceContext &c, float *buf, const float *g,
                        int64_t n, float share);
void sgdApplyMomentum(const rt::DeviceContext &c, const rt::UpdateItem *items,
                      int32_t count, const rt::Hyper &h);

// Ends the program with the CUDA error (naming `kernel`) if the last launch
// on this thread failed; generated code calls it after its own kernels.
// CUDA only (no twin in kernels.h).
void launched(const char *kernel);

} // namespace dtc::cuda
