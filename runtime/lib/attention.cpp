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

} // namespace

void attention(const rt::HostContext &, const float *q, const float *k, const float *v,
               float *out, float *lse, int64_t heads, int64_t tq, int64_t tk, int64_t d,
               int64_t dv, bool causal, float scale) {
  const Heads h{tq, tk, d, dv, causal, scale};
  rt::parallelFor(heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> kT(static_cast<size_t>(d * tk)), s(static_cast<size_t>(tk));
    for (int64_t b = begin; b < end; ++b) {
      const float *qh = q + b * tq * d, *kh = k + b * tk * d, *vh = v + b * tk * dv;
      float *oh = out + b * tq * dv, *lh = lse + b * tq;
      transposeInto(kh, tk, d, kT.data());
      for (int64_t i = 0; i < tq; ++i) {
        const int64_t n = h.keysOf(i);
        float *o = oh + i * dv;
        std::fill(o, o + dv, 0.0f);
        if (n <= 0) { // no key: softmax of nothing (torch: NaN; causal tq > tk only)
          lh[i] = -std::numeric_limits<float>::infinity();
          continue;
        }
        scores(qh + i * d, kT.data(), h, n, s.data());
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
          const float *vj = vh + j * dv;
          for (int64_t c = 0; c < dv; ++c)
            o[c] += p * vj[c];
        }
        lh[i] = m + float(std::log(sum));
      }
    }
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
    for (int64_t b = begin; b < end; ++b) {
      const float *qh = q + b * tq * d, *kh = k + b * tk * d, *vh = v + b * tk * dv;
      const float *oh = out + b * tq * dv, *lh = lse + b * tq, *doh = dout + b * tq * dv;
      float *dqh = dq + b * tq * d, *dkh = dk + b * tk * d, *dvh = dvOut + b * tk * dv;
      transposeInto(kh, tk, d, kT.data());
      transposeInto(vh, tk, dv, vT.data());
      std::fill(dkh, dkh + tk * d, 0.0f);
      std::fill(dvh, dvh + tk * dv, 0.0f);
      for (int64_t i = 0; i < tq; ++i) {
        const int64_t n = h.keysOf(i);
        const float *qi = qh + i * d, *doi = doh + i * dv, *oi = oh + i * dv;
        float *dqi = dqh + i * d;
        std::fill(dqi, dqi + d, 0.0f);
        if (n <= 0)
          continue;
        scores(qi, kT.data(), h, n, p.data());
        const float l = lh[i];
        for (int64_t j = 0; j < n; ++j)
          p[size_t(j)] = std::exp(p[size_t(j)] - l);
        // D_i = dO_i . O_i (= sum_j P_ij dP_ij)
        float di = 0;
        for (int64_t c = 0; c < dv; ++c)
          di += doi[c] * oi[c];
        // dP_ij = dO_i . v_j, over the keys from vT.
        std::fill(ds.begin(), ds.begin() + n, 0.0f);
        for (int64_t c = 0; c < dv; ++c) {
          const float g = doi[c];
          const float *vc = vT.data() + c * tk;
          for (int64_t j = 0; j < n; ++j)
            ds[size_t(j)] += g * vc[j];
        }
        for (int64_t j = 0; j < n; ++j)
          ds[size_t(j)] = p[size_t(j)] * (ds[size_t(j)] - di) * scale;
        for (int64_t j = 0; j < n; ++j) {
          const float pj = p[size_t(j)], sj = ds[size_t(j)];
          const float *kj = kh + j * d;
          float *dkj = dkh + j * d, *dvj = dvh + j * dv;
          for (int64_t c = 0; c < d; ++c) {
            dqi[c] += sj * kj[c];
            dkj[c] += sj * qi[c];
          }
          for (int64_t c = 0; c < dv; ++c)
            dvj[c] += pj * doi[c];
        }
      }
    }
  });
}

} // namespace dtc::kern
