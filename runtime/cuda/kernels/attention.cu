//===- attention.cu - Fused scaled dot-product attention (CUDA) -----------===//
//
// The CUDA twin of kernels/attention.cpp (dtc/cuda.h).
//
//===----------------------------------------------------------------------===//
#include "kernels/common.cuh"

namespace dtc::cuda {
namespace {

//===--- attention ------------------------------------------------------------===//

// One warp per query row (the heads' rows one after another), the lanes
// over the features: the scores are never stored. The forward makes two
// passes over the row's keys, the first for the max and the sum of the
// softmax (online), the second adding exp(s - lse) v into the output row,
// which only this warp writes. The backward has a warp per query row for
// dq and one per key row for dk and dv (no atomics: deterministic), each
// recomputing the probabilities from lse as the CPU kernel does.
struct AttentionShape {
  int64_t heads, group, qkRows, vRows, tq, tk, d, dv;
  bool causal;
  float scale;
  __device__ int64_t keysOf(int64_t i) const { return causal ? (i + 1 < tk ? i + 1 : tk) : tk; }
  // Row i of head h in a tensor of t rows `stride` floats apart, `cols` per
  // head: the heads contiguous (group 1) or interleaved row by row
  // ([heads / group, t, group, cols]), q, k and v possibly the slices of one
  // packed tensor (rows 3 group d apart), as the CPU kernel's.
  __device__ int64_t row(int64_t h, int64_t i, int64_t t, int64_t stride, int64_t cols) const {
    return ((h / group) * t + i) * stride + (h % group) * cols;
  }
  __device__ int64_t qk(int64_t h, int64_t i, int64_t t) const { return row(h, i, t, qkRows, d); }
  __device__ int64_t vRow(int64_t h, int64_t i) const { return row(h, i, tk, vRows, dv); }
  __device__ int64_t o(int64_t h, int64_t i) const { return row(h, i, tq, group * dv, dv); }
};

__device__ inline float warpDot(const float *a, const float *b, int64_t n) {
  float s = 0;
  for (int64_t c = threadIdx.x & 31; c < n; c += 32)
    s += a[c] * b[c];
  return warpSum(s);
}

__device__ inline int64_t globalWarp() {
  return (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
}

__global__ void attentionKernel(const float *q, const float *k, const float *v, float *out,
                                float *lse, AttentionShape a) {
  const int64_t row = globalWarp();
  if (row >= a.heads * a.tq)
    return;
  const int64_t h = row / a.tq, i = row - h * a.tq, n = a.keysOf(i);
  const int lane = threadIdx.x & 31;
  const float *qi = q + a.qk(h, i, a.tq), *kh = k + a.qk(h, 0, a.tk), *vh = v + a.vRow(h, 0);
  const int64_t rk = a.qkRows, rv = a.vRows;
  float *oi = out + a.o(h, i);
  float m = -INFINITY, l = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float s = warpDot(qi, kh + j * rk, a.d) * a.scale;
    const float mNew = maxOf(m, s);
    l = l * expf(m - mNew) + expf(s - mNew);
    m = mNew;
  }
  const float rowLse = m + logf(l);
  for (int64_t c = lane; c < a.dv; c += 32)
    oi[c] = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const float p = expf(warpDot(qi, kh + j * rk, a.d) * a.scale - rowLse);
    const float *vj = vh + j * rv;
    for (int64_t c = lane; c < a.dv; c += 32)
      oi[c] += p * vj[c];
  }
  if (lane == 0)
    lse[row] = rowLse;
}

__global__ void attentionGradQKernel(const float *q, const float *k, const float *v,
                                     const float *out, const float *lse, const float *dout,
                                     float *dq, AttentionShape a) {
  const int64_t row = globalWarp();
  if (row >= a.heads * a.tq)
    return;
  const int64_t h = row / a.tq, i = row - h * a.tq, n = a.keysOf(i);
  const int lane = threadIdx.x & 31;
  const float *qi = q + a.qk(h, i, a.tq), *kh = k + a.qk(h, 0, a.tk), *vh = v + a.vRow(h, 0);
  const int64_t rk = a.qkRows, rv = a.vRows;
  const float *doi = dout + a.o(h, i);
  float *dqi = dq + a.qk(h, i, a.tq);
  const float di = warpDot(doi, out + a.o(h, i), a.dv), l = lse[row];
  for (int64_t c = lane; c < a.d; c += 32)
    dqi[c] = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const float *kj = kh + j * rk;
    const float p = expf(warpDot(qi, kj, a.d) * a.scale - l);
    const float ds = p * (warpDot(doi, vh + j * rv, a.dv) - di) * a.scale;
    for (int64_t c = lane; c < a.d; c += 32)
      dqi[c] += ds * kj[c];
  }
}

__global__ void attentionGradKVKernel(const float *q, const float *k, const float *v,
                                      const float *out, const float *lse, const float *dout,
                                      float *dk, float *dv, AttentionShape a) {
  const int64_t row = globalWarp(); // a key row
  if (row >= a.heads * a.tk)
    return;
  const int64_t h = row / a.tk, j = row - h * a.tk;
  const int lane = threadIdx.x & 31;
  const float *kj = k + a.qk(h, j, a.tk), *vj = v + a.vRow(h, j);
  float *dkj = dk + a.qk(h, j, a.tk), *dvj = dv + a.vRow(h, j);
  for (int64_t c = lane; c < a.d; c += 32)
    dkj[c] = 0.0f;
  for (int64_t c = lane; c < a.dv; c += 32)
    dvj[c] = 0.0f;
  for (int64_t i = a.causal ? j : 0; i < a.tq; ++i) {
    const float *qi = q + a.qk(h, i, a.tq), *doi = dout + a.o(h, i);
    const float p = expf(warpDot(qi, kj, a.d) * a.scale - lse[h * a.tq + i]);
    const float di = warpDot(doi, out + a.o(h, i), a.dv);
    const float ds = p * (warpDot(doi, vj, a.dv) - di) * a.scale;
    for (int64_t c = lane; c < a.dv; c += 32)
      dvj[c] += p * doi[c];
    for (int64_t c = lane; c < a.d; c += 32)
      dkj[c] += ds * qi[c];
  }
}

} // namespace

void attention(const rt::DeviceContext &c, const float *q, const float *k, const float *v,
               float *out, float *lse, int64_t heads, int64_t group, int64_t qkRows,
               int64_t vRows, int64_t tq, int64_t tk, int64_t d, int64_t dv, bool causal,
               float scale) {
  if (heads <= 0 || tq <= 0)
    return;
  const AttentionShape a{heads, group, qkRows, vRows, tq, tk, d, dv, causal, scale};
  const int64_t warps = heads * tq, perBlock = kThreads / 32;
  attentionKernel<<<unsigned((warps + perBlock - 1) / perBlock), kThreads, 0, c.stream>>>(
      q, k, v, out, lse, a);
  checkLaunch("attention");
}

void attentionGrad(const rt::DeviceContext &c, const float *q, const float *k, const float *v,
                   const float *out, const float *lse, const float *dout, float *dq, float *dk,
                   float *dvOut, int64_t heads, int64_t group, int64_t qkRows, int64_t vRows,
                   int64_t tq, int64_t tk, int64_t d, int64_t dv, bool causal, float scale) {
  if (heads <= 0)
    return;
  const AttentionShape a{heads, group, qkRows, vRows, tq, tk, d, dv, causal, scale};
  const int64_t perBlock = kThreads / 32;
  // A sequence of length 0 has no rows to write on its side (no launch: a
  // grid of 0 blocks is an error); the other side's rows get 0 (no keys,
  // or no queries).
  if (tq > 0) {
    attentionGradQKernel<<<unsigned((heads * tq + perBlock - 1) / perBlock), kThreads, 0,
                           c.stream>>>(q, k, v, out, lse, dout, dq, a);
    checkLaunch("attentionGrad (dq)");
  }
  if (tk > 0) {
    attentionGradKVKernel<<<unsigned((heads * tk + perBlock - 1) / perBlock), kThreads, 0,
                            c.stream>>>(q, k, v, out, lse, dout, dk, dvOut, a);
    checkLaunch("attentionGrad (dk, dv)");
  }
}

} // namespace dtc::cuda
