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
// scores over the keys, the output over Dv. The loops keep 8 floats of
// their result in a register across the inner sum (the keys' rows padded to
// a multiple of 8); each sum still runs in the order of the scalar
// definition, so the floats do not depend on the vector width.
//
// The forward keeps only each row's log-sum-exp (lse [Tq]); the backward
// recomputes the probabilities from it, row by row, as FlashAttention's
// does: P = exp(S - lse), dV += P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO
// O)), dQ = scale dS K, dK += scale dS^T Q. P and dS of a head are kept
// ([Tq, Tk], 32 KB at T = 64) so that dK and dV are sums over the query rows
// per key row, in registers. A head's rows run in order on one thread,
// heads in parallel, so the sums are the same at any --threads.
//
//===----------------------------------------------------------------------===//
#include "dtc/kernels.h"

#include "parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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
  // The first query row that sees key j.
  int64_t firstRowOf(int64_t j) const { return causal ? j : 0; }
  // Rows of the transposed keys and values: tk padded to whole vectors.
  int64_t tkPadded() const { return (tk + 7) / 8 * 8; }
};

// Eight floats: one AVX register in the AVX2 clones, two SSE ones in the
// baseline. The helpers are always inlined into the clones, so the
// baseline's argument passing of 32-byte vectors (-Wpsabi) never applies.
#pragma GCC diagnostic ignored "-Wpsabi"
using v8 = float __attribute__((vector_size(32)));
[[gnu::always_inline]] inline v8 load8(const float *p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store8(float *p, v8 v) { std::memcpy(p, &v, sizeof v); }

// rows[c * ld + j] = m[j * cols + c]: a [n, cols] matrix transposed, its
// rows padded with zeros from n to ld.
inline void transposeInto(const float *m, int64_t n, int64_t cols, int64_t ld, float *rows) {
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t j = 0; j < n; ++j)
      rows[c * ld + j] = m[j * cols + c];
    std::fill(rows + c * ld + n, rows + (c + 1) * ld, 0.0f);
  }
}

// s[j] = sum_c a[c] bT[c, j], for j in [0, roundup(n, 8)) (bT [cols, ld]),
// times scale: the sum over c in order, 8 keys at a time in a register.
inline void rowTimesT(const float *a, const float *bT, int64_t cols, int64_t ld, int64_t n,
                      float scale, float *s) {
  for (int64_t jb = 0; jb < n; jb += 8) {
    v8 acc = {};
    for (int64_t c = 0; c < cols; ++c)
      acc += a[c] * load8(bT + c * ld + jb);
    store8(s + jb, scale == 1.0f ? acc : acc * scale);
  }
}

// out[c] = sum_{j in [j0, j1)} w[j * ws] m[j * cols + c], the sum over j in
// order: 8 columns at a time in a register (the rest one by one).
inline void weightedRows(const float *w, int64_t ws, const float *m, int64_t cols, int64_t j0,
                         int64_t j1, float *out) {
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    v8 acc = {};
    for (int64_t j = j0; j < j1; ++j)
      acc += w[j * ws] * load8(m + j * cols + c);
    store8(out + c, acc);
  }
  for (; c < cols; ++c) {
    float acc = 0;
    for (int64_t j = j0; j < j1; ++j)
      acc += w[j * ws] * m[j * cols + c];
    out[c] = acc;
  }
}

// One head's forward (see the top): out [tq, dv] and lse [tq]; kT [d,
// tkPadded] and s [tkPadded] are scratch. An AVX2 clone beside the baseline
// (the runtime library is built for the baseline ISA): no FMA, no reordered
// sum, so both give the same floats.
__attribute__((target_clones("avx2", "default")))
void attentionHead(const float *__restrict__ qh, const float *__restrict__ kh,
                   const float *__restrict__ vh, float *__restrict__ oh, float *__restrict__ lh,
                   const Heads &h, float *__restrict__ kT, float *__restrict__ s) {
  const int64_t tq = h.tq, d = h.d, dv = h.dv, ld = h.tkPadded();
  transposeInto(kh, h.tk, d, ld, kT);
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t n = h.keysOf(i);
    float *__restrict__ o = oh + i * dv;
    if (n <= 0) { // no key: softmax of nothing (torch: NaN; causal tq > tk only)
      std::fill(o, o + dv, 0.0f);
      lh[i] = -std::numeric_limits<float>::infinity();
      continue;
    }
    rowTimesT(qh + i * d, kT, d, ld, n, h.scale, s);
    float m = s[0];
    for (int64_t j = 1; j < n; ++j)
      m = std::max(m, s[j]);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
    const float inv = float(1.0 / sum);
    for (int64_t j = 0; j < n; ++j)
      s[j] *= inv;
    weightedRows(s, 1, vh, dv, 0, n, o);
    lh[i] = m + float(std::log(sum));
  }
}

// One head's backward (see the top); kT [d, tkPadded], vT [dv, tkPadded],
// p and ds [tq, tkPadded] are scratch.
__attribute__((target_clones("avx2", "default")))
void attentionGradHead(const float *__restrict__ qh, const float *__restrict__ kh,
                       const float *__restrict__ vh, const float *__restrict__ oh,
                       const float *__restrict__ lh, const float *__restrict__ doh,
                       float *__restrict__ dqh, float *__restrict__ dkh, float *__restrict__ dvh,
                       const Heads &h, float *__restrict__ kT, float *__restrict__ vT,
                       float *__restrict__ p, float *__restrict__ ds) {
  const int64_t tq = h.tq, tk = h.tk, d = h.d, dv = h.dv, ld = h.tkPadded();
  const float scale = h.scale;
  transposeInto(kh, tk, d, ld, kT);
  transposeInto(vh, tk, dv, ld, vT);
  for (int64_t i = 0; i < tq; ++i) {
    const int64_t n = h.keysOf(i);
    const float *__restrict__ qi = qh + i * d;
    const float *__restrict__ doi = doh + i * dv;
    const float *__restrict__ oi = oh + i * dv;
    float *__restrict__ pi = p + i * ld;
    float *__restrict__ dsi = ds + i * ld;
    if (n <= 0) {
      std::fill(dqh + i * d, dqh + (i + 1) * d, 0.0f);
      continue;
    }
    rowTimesT(qi, kT, d, ld, n, scale, pi);
    const float l = lh[i];
    for (int64_t j = 0; j < n; ++j)
      pi[j] = std::exp(pi[j] - l);
    // D_i = dO_i . O_i (= sum_j P_ij dP_ij)
    float di = 0;
    for (int64_t c = 0; c < dv; ++c)
      di += doi[c] * oi[c];
    // dP_ij = dO_i . v_j, over the keys from vT.
    rowTimesT(doi, vT, dv, ld, n, 1.0f, dsi);
    for (int64_t j = 0; j < n; ++j)
      dsi[j] = pi[j] * (dsi[j] - di) * scale;
    // dQ_i = sum_j dS_ij k_j
    weightedRows(dsi, 1, kh, d, 0, n, dqh + i * d);
  }
  // dK_j = sum_i dS_ij q_i and dV_j = sum_i P_ij dO_i over the rows that see
  // key j, in row order.
  for (int64_t j = 0; j < tk; ++j) {
    int64_t i0 = h.firstRowOf(j);
    weightedRows(ds + j, ld, qh, d, i0, tq, dkh + j * d);
    weightedRows(p + j, ld, doh, dv, i0, tq, dvh + j * dv);
  }
}

} // namespace

void attention(const rt::HostContext &, const float *q, const float *k, const float *v,
               float *out, float *lse, int64_t heads, int64_t tq, int64_t tk, int64_t d,
               int64_t dv, bool causal, float scale) {
  const Heads h{tq, tk, d, dv, causal, scale};
  const int64_t ld = h.tkPadded();
  rt::parallelFor(heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> kT(static_cast<size_t>(d * ld)), s(static_cast<size_t>(ld));
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
  const int64_t ld = h.tkPadded();
  rt::parallelFor(heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> kT(static_cast<size_t>(d * ld)), vT(static_cast<size_t>(dv * ld)),
        p(static_cast<size_t>(tq * ld)), ds(static_cast<size_t>(tq * ld));
    for (int64_t b = begin; b < end; ++b)
      attentionGradHead(q + b * tq * d, k + b * tk * d, v + b * tk * dv, out + b * tq * dv,
                        lse + b * tq, dout + b * tq * dv, dq + b * tq * d, dk + b * tk * d,
                        dvOut + b * tk * dv, h, kT.data(), vT.data(), p.data(), ds.data());
  });
}

} // namespace dtc::kern
