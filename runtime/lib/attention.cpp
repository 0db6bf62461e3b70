//===- attention.cpp - Fused scaled dot-product attention (CPU) -----------===//
//
// F.scaled_dot_product_attention for heads of q [Tq, D], k [Tk, D], v
// [Tk, Dv]: out = softmax(q k^T scale (+ causal mask)) v, in one kernel per
// head. A query row's scores live in a row buffer of Tk floats (L1 for any
// context a CPU trains), are scaled, masked (keys after the query skipped,
// not written) and normalized in place, and meet v in the same pass: no
// [Tq, Tk] matrix is ever stored. The head's keys are first transposed
// into a [D, Tk] scratch, so that every inner loop runs over contiguous
// floats without a reduction (GCC vectorizes them without -ffast-math): the
// scores over the keys, the output over Dv.
//
// The forward keeps only each row's log-sum-exp (lse [Tq]); the backward
// recomputes the probabilities from it, row by row, as FlashAttention's
// does: P = exp(S - lse), dV += P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO
// O)), dQ = scale dS K, dK += scale dS^T Q. A head's rows run in order on
// one thread, heads in parallel, so the sums are the same at any --threads.
//
//===----------------------------------------------------------------------===//
#include "dtc/kernels.h"

#include "parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace dtc::kern {
namespace {

struct Heads {
  int64_t tq, tk, d, dv;
  bool causal;
  float scale;
  // Keys a query row sees: all, or those up to its own place.
  int64_t keysOf(int64_t i) const { return causal ? std::min(i + 1, tk) : tk; }
};

// rows[c * n + j] = m[j * cols + c]: a [n, cols] matrix transposed.
void transposeInto(const float *m, int64_t n, int64_t cols, float *rows) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < cols; ++c)
      rows[c * n + j] = m[j * cols + c];
}

// s[0..n) = scale * q . k_j, from kT [D, tk].
void scores(const float *q, const float *kT, const Heads &h, int64_t n, float *s) {
  std::fill(s, s + n, 0.0f);
  for (int64_t c = 0; c < h.d; ++c) {
    const float qc = q[c];
    const float *kc = kT + c * h.tk;
    for (int64_t j = 0; j < n; ++j)
      s[j] += qc * kc[j];
  }
  for (int64_t j = 0; j < n; ++j)
    s[j] *= h.scale;
}

// One head's forward (see the top): out [tq, dv] and lse [tq]; kT and s
// are scratch of d * tk and tk floats. An AVX2 clone beside the baseline
// (the runtime library is built for the baseline ISA): no FMA, no reordered
// sum, so both give the same floats.
__attribute__((target_clones("avx2", "default")))
void attentionHead(const float *__restrict__ qh, const float *__restrict__ kh,
                   const float *__restrict__ vh, float *__restrict__ oh, float *__restrict__ lh,
                   const Heads &h, float *__restrict__ kT, float *__restrict__ s) {
  const int64_t tq = h.tq, d = h.d, dv = h.dv;
  transposeInto(kh, h.tk, d, kT);
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t n = h.keysOf(i);
    float *__restrict__ o = oh + i * dv;
    std::fill(o, o + dv, 0.0f);
    if (n <= 0) { // no key: softmax of nothing (torch: NaN; causal tq > tk only)
      lh[i] = -std::numeric_limits<float>::infinity();
      continue;
    }
    scores(qh + i * d, kT, h, n, s);
    float m = s[0];
    for (int64_t j = 1; j < n; ++j)
      m = std::max(m, s[j]);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
    const float inv = float(1.0 / sum);
    for (int64_t j = 0; j < n; ++j) {
      const float p = s[j] * inv;
      const float *__restrict__ vj = vh + j * dv;
      for (int64_t c = 0; c < dv; ++c)
        o[c] += p * vj[c];
    }
    lh[i] = m + float(std::log(sum));
  }
}

// One head's backward (see the top); kT, vT, p and ds are scratch.
__attribute__((target_clones("avx2", "default")))
void attentionGradHead(const float *__restrict__ qh, const float *__restrict__ kh,
                       const float *__restrict__ vh, const float *__restrict__ oh,
                       const float *__restrict__ lh, const float *__restrict__ doh,
                       float *__restrict__ dqh, float *__restrict__ dkh, float *__restrict__ dvh,
                       const Heads &h, float *__restrict__ kT, float *__restrict__ vT,
                       float *__restrict__ p, float *__restrict__ ds) {
  const int64_t tq = h.tq, tk = h.tk, d = h.d, dv = h.dv;
  const float scale = h.scale;
  transposeInto(kh, tk, d, kT);
  transposeInto(vh, tk, dv, vT);
  std::fill(dkh, dkh + tk * d, 0.0f);
  std::fill(dvh, dvh + tk * dv, 0.0f);
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t n = h.keysOf(i);
    const float *__restrict__ qi = qh + i * d;
    const float *__restrict__ doi = doh + i * dv;
    const float *__restrict__ oi = oh + i * dv;
    float *__restrict__ dqi = dqh + i * d;
    std::fill(dqi, dqi + d, 0.0f);
    if (n <= 0)
      continue;
    scores(qi, kT, h, n, p);
    const float l = lh[i];
    for (int64_t j = 0; j < n; ++j)
      p[j] = std::exp(p[j] - l);
    // D_i = dO_i . O_i (= sum_j P_ij dP_ij)
    float di = 0;
    for (int64_t c = 0; c < dv; ++c)
      di += doi[c] * oi[c];
    // dP_ij = dO_i . v_j, over the keys from vT.
    std::fill(ds, ds + n, 0.0f);
    for (int64_t c = 0; c < dv; ++c) {
      const float g = doi[c];
      const float *__restrict__ vc = vT + c * tk;
      for (int64_t j = 0; j < n; ++j)
        ds[j] += g * vc[j];
    }
    for (int64_t j = 0; j < n; ++j)
      ds[j] = p[j] * (ds[j] - di) * scale;
    for (int64_t j = 0; j < n; ++j) {
      const float pj = p[j], sj = ds[j];
      const float *__restrict__ kj = kh + j * d;
      float *__restrict__ dkj = dkh + j * d;
      float *__restrict__ dvj = dvh + j * dv;
      for (int64_t c = 0; c < d; ++c)
        dqi[c] += sj * kj[c];
      for (int64_t c = 0; c < d; ++c)
        dkj[c] += sj * qi[c];
      for (int64_t c = 0; c < dv; ++c)
        dvj[c] += pj * doi[c];
    }
  }
}

} // namespace

void attention(const rt::HostContext &, const float *q, const float *k, const float *v,
               float *out, float *lse, int64_t heads, int64_t tq, int64_t tk, int64_t d,
               int64_t dv, bool causal, float scale) {
  const Heads h{tq, tk, d, dv, causal, scale};
  rt::parallelFor(heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> kT(static_cast<size_t>(d * tk)), s(static_cast<size_t>(tk));
    for (int64_t b = begin; b < end; ++b)
      attentionHead(q + b * tq * d, k + b * tk * d, v + b * tk * dv, out + b * tq * dv,
                    lse + b * tq, h, kT.data(), s.data());
  });
}

void attentionGrad(const rt::HostContext &, const float *q, const float *k, const float *v,
                   const float *out, const float *lse, const float *dout, float *dq, float *dk,
                   float *dvOut, int64_t heads, int64_t tq, int64_t tk, int64_t d, int64_t dv,
                   bool causal, float scale) {
  const Heads h{tq, tk, d, dv, causal, scale};
  rt::parallelFor(heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> kT(static_cast<size_t>(d * tk)), vT(static_cast<size_t>(dv * tk)),
        p(static_cast<size_t>(tk)), ds(static_cast<size_t>(tk));
    for (int64_t b = begin; b < end; ++b)
      attentionGradHead(q + b * tq * d, k + b * tk * d, v + b * tk * dv, out + b * tq * dv,
                        lse + b * tq, dout + b * tq * dv, dq + b * tq * d, dk + b * tk * d,
                        dvOut + b * tk * dv, h, kT.data(), vT.data(), p.data(), ds.data());
  });
}

} // namespace dtc::kern
