//===- kernels.h - Non-elementwise kernels called by generated CPU code ---===//
//
// Elementwise work is generated as fused loops by dtc; everything else the
// generated step calls lives here. All tensors are dense, row-major float32
// (labels int32). An "axis view" [outer, n, inner] describes a reduction over
// the middle dimension of a tensor reshaped to three dimensions.
//
// Every kernel takes the step's context first (rt::HostContext, runtime.h);
// after it, the parameters are those of its CUDA twin in dtc/cuda.h, so that
// generated code calls both the same way, differing in the namespace and the
// type of the context only.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"
#include <cstdint>

namespace dtc::kern {

// A generated elementwise kernel's loop: fn(ctx, lo, hi) over [lo, hi) of
// its `units` units (elements, or rows of unitElements), the range split
// over the --threads cores when it is large enough (32K elements a thread
// at least); each element is computed once, as in one pass: the same bits
// at any --threads. The template takes the call site's lambda.
void forRanges(const rt::HostContext &c, int64_t units, int64_t unitElements,
               void (*fn)(void *, int64_t, int64_t), void *ctx);
template <class F>
void forRanges(const rt::HostContext &c, int64_t units, int64_t unitElements, const F &f) {
  forRanges(
      c, units, unitElements,
      [](void *p, int64_t lo, int64_t hi) { (*static_cast<const F *>(p))(lo, hi); },
      const_cast<F *>(&f));
}

// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major. op(A) is [M,K]:
// A is stored [M,K] (transA=false) or [K,M] (transA=true); likewise B.
void gemm(const rt::HostContext &c, bool transA, bool transB, int64_t M, int64_t N,
          int64_t K, float alpha, const float *A, const float *B, float beta, float *C);

// count such products, each operand's matrices one after another: A_i at
// A + i M K, B_i at B + i K N, C_i at C + i M N (torch.bmm; a batched
// dtc.matmul).
void gemmBatched(const rt::HostContext &c, bool transA, bool transB, int64_t count, int64_t M,
                 int64_t N, int64_t K, float alpha, const float *A, const float *B, float beta,
                 float *C);

// y = x with dimensions permuted: y.shape[i] = x.shape[perm[i]]; rank <= 6.
void permute(const rt::HostContext &c, const float *x, float *y, int32_t rank,
             const int64_t *xShape, const int32_t *perm);

// Reductions over the middle axis of [outer, n, inner] -> [outer, inner]:
// the sum, the maximum, and the mean (the sum divided by n).
void reduceSum(const rt::HostContext &c, const float *x, float *y, int64_t outer,
               int64_t n, int64_t inner);
void reduceMax(const rt::HostContext &c, const float *x, float *y, int64_t outer,
               int64_t n, int64_t inner);
void reduceMean(const rt::HostContext &c, const float *x, float *y, int64_t outer,
                int64_t n, int64_t inner);
// dx[o,i,k] = dy[o,k] where x[o,i,k] is the first maximum along i, else 0.
void reduceMaxGrad(const rt::HostContext &c, const float *x, const float *y,
                   const float *dy, float *dx, int64_t outer, int64_t n, int64_t inner);

// Sum x (shape xShape, rank xRank) down to yShape (rank yRank <= xRank), the
// inverse of numpy broadcasting (yShape right-aligned; size-1 or missing dims
// are summed over).
void sumTo(const rt::HostContext &c, const float *x, int32_t xRank,
           const int64_t *xShape, float *y, int32_t yRank, const int64_t *yShape);

// Softmax family over the middle axis of [outer, n, inner].
void softmax(const rt::HostContext &c, const float *x, float *y, int64_t outer,
             int64_t n, int64_t inner);
void logSoftmax(const rt::HostContext &c, const float *x, float *y, int64_t outer,
                int64_t n, int64_t inner);
// dx = y * (dy - sum(dy * y)), y = softmax(x)
void softmaxGrad(const rt::HostContext &c, const float *y, const float *dy, float *dx,
                 int64_t outer, int64_t n, int64_t inner);
// dx = dy - exp(y) * sum(dy), y = log_softmax(x)
void logSoftmaxGrad(const rt::HostContext &c, const float *y, const float *dy,
                    float *dx, int64_t outer, int64_t n, int64_t inner);

// Losses and metrics write their scalar result to out[0]; the gradients read
// dloss[0]. The losses accumulate in double. The class losses and metrics
// go over rows of C logits; a row whose label is `ignore` (cross_entropy's
// ignore_index) does not count (every row ignored: NaN, as torch); a class
// label outside [0, C) that is not `ignore` is a fatal runtime error.
// Mean softmax cross-entropy of logits [B, C] against class labels [B].
void crossEntropy(const rt::HostContext &c, const float *logits,
                  const int32_t *labels, int64_t B, int64_t C, int64_t ignore, float *out);
// dlogits = dloss * (softmax(logits) - onehot(labels)) / counted rows; 0
// in ignored rows
void crossEntropyGrad(const rt::HostContext &c, const float *logits,
                      const int32_t *labels, int64_t B, int64_t C, int64_t ignore,
                      const float *dloss, float *dlogits);
// Mean squared error over all n elements; grad: dp = dloss * 2 (p - t) / n
void mse(const rt::HostContext &c, const float *p, const float *t, int64_t n,
         float *out);
void mseGrad(const rt::HostContext &c, const float *p, const float *t, int64_t n,
             const float *dloss, float *dp);
// Fraction of counted rows whose arg-max (first maximum) equals the label.
void accuracy(const rt::HostContext &c, const float *logits, const int32_t *labels,
              int64_t B, int64_t C, int64_t ignore, float *out);

// Gradient clipping (dtc-clip-grad-norm): acc[0] += sum of x[i]^2 (in
// double per call); coef[0] = min(1, h.maxGradNorm / (sqrt(sumSquares[0]) +
// 1e-6)), or 1 when maxGradNorm <= 0 (torch.nn.utils.clip_grad_norm_).
void sumSquares(const rt::HostContext &c, const float *x, int64_t n, float *acc);
void clipCoef(const rt::HostContext &c, const float *sumSquares, const rt::Hyper &h,
              float *coef);
// x[i] = i for i in [0, n): the positions of a sequence (torch.arange).
void arange(const rt::HostContext &c, int32_t *x, int64_t n);
// Embeddings: out [rows, dim] = the rows of weight [num, dim] at ids [rows];
// the gradient dweight [num, dim] = the rows of dy [rows, dim] summed by
// their ids, in row order (the same at any --threads). An id outside
// [0, num) is a fatal runtime error (the data is checked when loaded).
void embedding(const rt::HostContext &c, const float *weight, const int32_t *ids,
               int64_t rows, int64_t num, int64_t dim, float *out);
void embeddingGrad(const rt::HostContext &c, const int32_t *ids, const float *dy,
                   int64_t rows, int64_t num, int64_t dim, float *dweight);

// Copies n floats from src to dst unless dst is null (the prediction rows
// of the evaluation step, asked for by train --predict only).
void exportPrediction(const rt::HostContext &c, float *dst, const float *src, int64_t n);
// Gradient accumulation (accumulate = K): acc[0..n) += g (the micro-batches
// before the last); out = g + acc and acc = 0 (the last, before the
// all-reduce), so that acc is zero at every optimizer step's end.
void accumulate(const rt::HostContext &c, float *acc, const float *g, int64_t n);
void takeAccumulated(const rt::HostContext &c, float *acc, const float *g, float *out,
                     int64_t n);
// Fills n floats with v; copies n floats (dst and src do not overlap, or
// are equal).
void fill(const rt::HostContext &c, float *x, int64_t n, float v);
void copy(const rt::HostContext &c, float *dst, const float *src, int64_t n);
// dst[r * dstStride + i] = src[r * srcStride + i] for r < rows, i < len: a
// piece of a split (src the whole tensor, dst the piece) or of a concat.
void copyRows(const rt::HostContext &c, const float *src, int64_t srcStride, float *dst,
              int64_t dstStride, int64_t rows, int64_t len);

// Inverted dropout of n elements: y = x / (1 - p) where
// rt::dropoutKeeps(seed, salt, i, p), else 0 (all 0 when p == 1); the
// gradient sends dy through the same mask and scale.
void dropout(const rt::HostContext &c, const float *x, float *y, int64_t n, float p, uint64_t seed,
             int64_t salt);
void dropoutGrad(const rt::HostContext &c, const float *dy, float *dx, int64_t n, float p, uint64_t seed,
                 int64_t salt);

// Batch normalization of x [n, channels, inner] per channel, as
// torch.nn.BatchNorm1d / 2d (lanes 1; lanes 16: x is blocked, [n, channels
// / 16, inner, 16], the nChw16c tensors dtc-blocked-layout plans). In
// training (batchNorm) with the batch's statistics, which it writes to mean
// and var (the biased variance); batchNormGrad gives dx (through the
// statistics too), dweight and dbias; batchNormInference normalizes with the
// given statistics. With relu the result is max(y, 0); reluResult (that
// result, or null) makes the gradient count dy only where it is positive.
// updateRunningStats folds a batch's statistics (count elements per channel)
// into the running ones with `momentum` (the variance made unbiased) and
// counts the batch in *numBatchesTracked.
void batchNorm(const rt::HostContext &c, const float *x, const float *weight, const float *bias,
               float *y, float *mean, float *var, int64_t n, int64_t channels, int64_t inner,
               float eps, bool relu, int64_t lanes);
void batchNormGrad(const rt::HostContext &c, const float *x, const float *dy, const float *mean,
                   const float *var, const float *weight, const float *reluResult, float *dx,
                   float *dweight, float *dbias, int64_t n, int64_t channels, int64_t inner,
                   float eps, int64_t lanes);
// batchNormGradMaxPool is batchNormGrad when dy is the gradient of a max
// pooling (`window`, NCHW, lanes 1) of reluResult: it takes pooledDy, the
// gradient of the pooling's result, and gives what maxPool2dGrad then
// batchNormGrad give.
void batchNormGradMaxPool(const rt::HostContext &c, const float *x, const float *pooledDy,
                          const float *mean, const float *var, const float *weight,
                          const float *reluResult, float *dx, float *dweight, float *dbias,
                          int64_t n, int64_t channels, int64_t inner, float eps, int64_t lanes,
                          const int64_t *window);
void batchNormInference(const rt::HostContext &c, const float *x, const float *weight,
                        const float *bias, const float *mean, const float *var, float *y,
                        int64_t n, int64_t channels, int64_t inner, float eps, bool relu,
                        int64_t lanes);
void updateRunningStats(const rt::HostContext &c, const float *mean, const float *var,
                        float *runningMean, float *runningVar, int64_t *numBatchesTracked,
                        int64_t channels, int64_t count, float momentum);

// Layer normalization (torch.nn.LayerNorm over the last dimension) of each
// row of x [rows, d]: y = (x - mean) rstd weight + bias, rstd = 1 /
// sqrt(var + eps) (biased variance), mean and rstd [rows] kept for the
// gradient, which writes dx, dweight and dbias (summed over the rows).
void layerNorm(const rt::HostContext &c, const float *x, const float *weight, const float *bias,
               float *y, float *mean, float *rstd, int64_t rows, int64_t d, float eps);
void layerNormGrad(const rt::HostContext &c, const float *x, const float *dy, const float *mean,
                   const float *rstd, const float *weight, float *dx, float *dweight,
                   float *dbias, int64_t rows, int64_t d);

// Scaled dot-product attention (F.scaled_dot_product_attention) of `heads`
// independent heads (batch x heads, contiguous): q [heads, tq, d], k
// [heads, tk, d], v [heads, tk, dv] -> out [heads, tq, dv] = softmax(q k^T
// scale, keys after the query masked out when causal) v, and each row's
// log-sum-exp lse [heads, tq], all the gradient keeps (attention.cpp: one
// fused kernel, the scores of one row at a time). The gradient recomputes
// the probabilities from lse and writes dq, dk, dv; the same bits at any
// --threads. With group > 1 the heads of q, k, v, out and their gradients
// are interleaved row by row, [heads / group, t, group, d] (torch's [B, T,
// H, D] before transpose(1, 2)); lse stays [heads, tq]. The rows of q and k
// (and dq, dk) are qkRows floats apart, those of v (and dv) vRows: group d
// and group dv, or 3 group d where q, k and v are the slices of one packed
// [B, T, 3, H, D] tensor (flash_attn_qkvpacked_func's layout), their
// gradients written into the slices of dqkv likewise. out and dout rows
// are group dv apart.
void attention(const rt::HostContext &c, const float *q, const float *k, const float *v,
               float *out, float *lse, int64_t heads, int64_t group, int64_t qkRows,
               int64_t vRows, int64_t tq, int64_t tk, int64_t d, int64_t dv, bool causal,
               float scale);
void attentionGrad(const rt::HostContext &c, const float *q, const float *k, const float *v,
                   const float *out, const float *lse, const float *dout, float *dq, float *dk,
                   float *dvOut, int64_t heads, int64_t group, int64_t qkRows, int64_t vRows,
                   int64_t tq, int64_t tk, int64_t d, int64_t dv, bool causal, float scale);

// Convolution and pooling of NCHW tensors, as torch.nn's Conv2d, MaxPool2d
// and AvgPool2d; N samples, `window` a rt::Window2d's 15 values. cols is
// scratch of C kH kW Ho Wo floats (one sample's im2col columns; its contents
// on entry do not matter). The gradients write (not accumulate) dx and dw;
// conv2dGradWeight sums over the N samples. bias ([O], added to each output
// channel) and dbias (its gradient: dy summed per channel) may be null.
void conv2d(const rt::HostContext &c, const float *x, const float *weight, const float *bias,
            float *y, float *cols, int64_t N, const int64_t *window);
void conv2dGradInput(const rt::HostContext &c, const float *dy, const float *weight, float *dx,
                     float *cols, int64_t N, const int64_t *window);
void conv2dGradWeight(const rt::HostContext &c, const float *x, const float *dy, float *dw,
                      float *dbias, float *cols, int64_t N, const int64_t *window);
// Max pooling (padding never wins); the gradient routes each window's dy to
// its first maximum in row-major order, as PyTorch's CPU kernel (by >, as
// reduceMax: a NaN is kept only where it comes first).
void maxPool2d(const rt::HostContext &c, const float *x, float *y, int64_t N, const int64_t *window);
void maxPool2dGrad(const rt::HostContext &c, const float *x, const float *dy, float *dx, int64_t N,
                   const int64_t *window);
// Average pooling over the zero-padded input: divided by the window clipped
// to the padded input (countIncludePad, PyTorch's default) or to the input.
void avgPool2d(const rt::HostContext &c, const float *x, float *y, int64_t N, const int64_t *window,
               bool countIncludePad);
void avgPool2dGrad(const rt::HostContext &c, const float *dy, float *dx, int64_t N,
                   const int64_t *window, bool countIncludePad);

// Optimizer updates of `count` parameters (rt::UpdateItem, runtime.h), one
// after the other, PyTorch semantics (torch.optim.SGD / Adam / AdamW).
// SGD: g += wd*w; buf = momentum*buf + (1-dampening)*g (buf = g on step 1);
//      g = nesterov ? g + momentum*buf : buf; w -= lr*g.
//      s0 is buf; SGD without momentum may pass s0 = null.
// With gradScale (not null: dtc-clip-grad-norm's factor, in the arena),
// each gradient element is read times *gradScale (SGD and Adam).
void sgdUpdate(const rt::HostContext &c, const rt::UpdateItem *items, int32_t count,
               const rt::Hyper &h, const float *gradScale);
// Adam (decoupled=false: g += wd*w) / AdamW (decoupled=true: w *= 1-lr*wd);
// s0 = m (exp_avg), s1 = v (exp_avg_sq).
void adamUpdate(const rt::HostContext &c, const rt::UpdateItem *items, int32_t count,
                const rt::Hyper &h, const float *gradScale, bool decoupled);

// SGD momentum folded into the gradient buckets (dtc.fold_momentum: no
// dampening, Nesterov or weight decay). Each of W ranks accumulates its
// gradient into the momentum buffer, buf = g_r + share * buf, with
// share = rt::momentumShare(h, W) (0 on step 1, momentum / W after), and the
// bucket's all-reduce sums the buffers to momentum * buf + sum_r g_r, the
// new buf. GEMMs producing a gradient accumulate with beta = share
// themselves.
// momentumAccumulate: share == 0 copies g into buf (whatever buf held),
// else buf = g + share * buf.
void momentumAccumulate(const rt::HostContext &c, float *buf, const float *g,
                        int64_t n, float share);
// Each item's g is its summed momentum buffer: w -= lr * g (plain SGD with
// momentum and weight decay taken as 0; s0, s1 unused).
void sgdApplyMomentum(const rt::HostContext &c, const rt::UpdateItem *items,
                      int32_t count, const rt::Hyper &h);

} // namespace dtc::kern
