//===- kernels.h - Non-elementwise kernels called by generated CPU code ---===//
//
// Elementwise work is generated as fused loops by dtc; everything else the
// generated step calls lives here. All tensors are dense, row-major float32
// (labels int32). An "axis view" [outer, n, inner] describes a reduction over
// the middle dimension of a tensor reshaped to three dimensions.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"
#include <cstdint>

namespace dtc::kern {

// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major. op(A) is [M,K]:
// A is stored [M,K] (transA=false) or [K,M] (transA=true); likewise B.
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, const float *B, float beta, float *C);

// y = x with dimensions permuted: y.shape[i] = x.shape[perm[i]]; rank <= 6.
void permute(const float *x, float *y, int32_t rank, const int64_t *xShape,
             const int32_t *perm);

// Reductions over the middle axis of [outer, n, inner] -> [outer, inner].
void reduceSum(const float *x, float *y, int64_t outer, int64_t n, int64_t inner);
void reduceMax(const float *x, float *y, int64_t outer, int64_t n, int64_t inner);
// dx[o,i,k] = dy[o,k] where x[o,i,k] is the first maximum along i, else 0.
void reduceMaxGrad(const float *x, const float *y, const float *dy, float *dx,
                   int64_t outer, int64_t n, int64_t inner);

// Sum x (shape xShape, rank xRank) down to yShape (rank yRank <= xRank), the
// inverse of numpy broadcasting (yShape right-aligned; size-1 or missing dims
// are summed over).
void sumTo(const float *x, int32_t xRank, const int64_t *xShape, float *y,
           int32_t yRank, const int64_t *yShape);

// Softmax family over the middle axis of [outer, n, inner].
void softmax(const float *x, float *y, int64_t outer, int64_t n, int64_t inner);
void logSoftmax(const float *x, float *y, int64_t outer, int64_t n, int64_t inner);
// dx = y * (dy - sum(dy * y)), y = softmax(x)
void softmaxGrad(const float *y, const float *dy, float *dx, int64_t outer,
                 int64_t n, int64_t inner);
// dx = dy - exp(y) * sum(dy), y = log_softmax(x)
void logSoftmaxGrad(const float *y, const float *dy, float *dx, int64_t outer,
                    int64_t n, int64_t inner);

// Mean softmax cross-entropy of logits [B, C] against class labels [B].
// Accumulates in double. A label outside [0, C) is a fatal runtime error.
float crossEntropy(const float *logits, const int32_t *labels, int64_t B, int64_t C);
// dlogits = dloss * (softmax(logits) - onehot(labels)) / B
void crossEntropyGrad(const float *logits, const int32_t *labels, int64_t B,
                      int64_t C, const float *dloss, float *dlogits);
// Mean squared error over all n elements; grad: dp = dloss * 2 (p - t) / n
float mse(const float *p, const float *t, int64_t n);
void mseGrad(const float *p, const float *t, int64_t n, const float *dloss, float *dp);
// Fraction of rows whose arg-max (first maximum) equals the label.
float accuracy(const float *logits, const int32_t *labels, int64_t B, int64_t C);

// Optimizer updates, PyTorch semantics (torch.optim.SGD / Adam / AdamW).
// SGD: g += wd*w; buf = momentum*buf + (1-dampening)*g (buf = g on step 1);
//      g = nesterov ? g + momentum*buf : buf; w -= lr*g.
void sgdUpdate(float *w, const float *g, float *buf, int64_t n, const rt::Hyper &h);
// SGD momentum folded into the gradient buckets (dtc.fold_momentum: no
// dampening, Nesterov or weight decay). Each of W ranks accumulates its
// gradient into the momentum buffer, buf = g_r + share * buf, with
// share = momentumShare(h, W) (0 on step 1, momentum / W after), and the
// bucket's all-reduce sums the buffers to momentum * buf + sum_r g_r, the
// new buf. GEMMs producing a gradient accumulate with beta = share
// themselves; sgdApplyMomentum then does w -= lr * buf.
float momentumShare(const rt::Hyper &h, int worldSize);
void momentumAccumulate(float *buf, const float *g, int64_t n, float share);
void sgdApplyMomentum(float *w, const float *buf, int64_t n, const rt::Hyper &h);
// Adam (decoupled=false: g += wd*w) / AdamW (decoupled=true: w *= 1-lr*wd).
void adamUpdate(float *w, const float *g, float *m, float *v, int64_t n,
                const rt::Hyper &h, bool decoupled);

} // namespace dtc::kern
