//===- attention.cpp - Fused scaled dot-product attention (CPU) -----------===//
//
// F.scaled_dot_product_attention for heads of q [Tq, D], k [Tk, D], v
// [Tk, Dv]: out = softmax(q k^T scale (+ causal mask)) v, in one kernel per
// head. A query row's scores live in a row buffer of Tk floats (L1 for any
// context a CPU trains), are scaled, masked (keys after the query skipped,
// not written) and exponentiated in place, and meet v in the same pass; the
// row's output is then divided by its sum of exponentials (Dv products a
// row rather than Tk, as torch's CPU kernel divides last): no [Tq, Tk]
// matrix is ever stored. The head's keys are first transposed
// into a [D, Tk] scratch, so that every inner loop runs over contiguous
// floats without a reduction (GCC vectorizes them without -ffast-math): the
// scores over the keys, the output over Dv. The loops run over tiles of
// four query rows (or keys, for dK and dV) by 16 columns, the tile's sums
// in eight registers across the inner sum (the keys' rows padded to a
// multiple of 8); each sum still runs in the order of the scalar
// definition, so the floats do not depend on the vector width. The
// exponentials are simd::expNonPositive8's, eight at a time; a row's sum
// of them is eight lane sums added in double. A tile's rows go through
// the softmax in lockstep, so that their chains overlap. Every loop that
// touches a row writes it with vector stores, its last vector masked (a
// scalar pass over floats just stored as vectors stalls on each load: it
// was a tenth of the forward), and only up to the tile's last key. In the
// x86-64-v3 clone each product and sum is one FMA: 13% of the GPT's
// attention on a Zen 3.
//
// The forward keeps only each row's log-sum-exp (lse [Tq]); the backward
// recomputes the probabilities from it, row by row, as FlashAttention's
// does: P = exp(S - lse), dV += P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO
// O)), dQ = scale dS K, dK += scale dS^T Q. P and dS of a head are kept
// ([Tq, Tk], 32 KB at T = 64) so that dK and dV are sums over the query rows
// per key row, in registers. A head's rows run in order on one thread,
// heads in parallel, so the sums are the same at any --threads; each
// thread's scratch (transposed keys, P, dS) is kept from call to call.
//
// The heads are contiguous ([heads, t, d]) or, with group > 1, interleaved
// row by row ([heads / group, t, group, d]: dtc-attention-tokens-first's
// [B, T, H, D], read in place), and q, k, v may be slices of one packed
// tensor ([B, T, 3, H, D]: dtc-attention-qkv-packed's, their rows 3 H D
// floats apart): every row is found at its tensor's row stride.
//
//===----------------------------------------------------------------------===//
#include "dtc/kernels.h"

#include "kernels/parallel.h"
#include "kernels/simd.h"

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
  // Heads interleaved row by row ([heads / group, t, group, d]), q and k
  // (and their gradients) rows qk floats apart, v (and dv) rows vr apart:
  // group d and group dv, or more where q, k and v are slices of one
  // packed tensor ([..., t, 3, group, d]: qk = vr = 3 group d).
  int64_t group, qk, vr;
  // The row strides of each tensor (d or dv in a head's contiguous copy).
  struct Rows {
    int64_t q, k, v, o, dO, dq, dk, dv;
  } rows = {qk, qk, vr, group * dv, group * dv, qk, qk, vr};
  // Where head b's first row starts in a tensor of t rows `stride` apart,
  // `cols` a head's.
  int64_t base(int64_t b, int64_t t, int64_t stride, int64_t cols) const {
    return (b / group) * t * stride + (b % group) * cols;
  }
  // Keys a query row sees: all, or those up to its own place.
  int64_t keysOf(int64_t i) const { return causal ? std::min(i + 1, tk) : tk; }
  // The first query row that sees key j.
  int64_t firstRowOf(int64_t j) const { return causal ? j : 0; }
  // Rows of the transposed keys and values: tk padded to whole vectors.
  int64_t tkPadded() const { return (tk + 7) / 8 * 8; }
};

using simd::load8;
using simd::store8;
using simd::v8;

// dst[c ds + j] = src[j ss + c] for an 8 x 8 block: the unpack, shuffle
// and 128-bit permute steps of the AVX transpose.
[[gnu::always_inline]] inline void transpose8x8(const float *src, int64_t ss, float *dst,
                                                int64_t ds) {
  v8 r[8], t[8], u[8];
  for (int k = 0; k < 8; ++k)
    r[k] = load8(src + k * ss);
  for (int k = 0; k < 8; k += 2) {
    t[k] = __builtin_shufflevector(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[k + 1] = __builtin_shufflevector(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int k = 0; k < 8; k += 4)
    for (int h = 0; h < 2; ++h) {
      u[k + 2 * h] = __builtin_shufflevector(t[k + h], t[k + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[k + 2 * h + 1] =
          __builtin_shufflevector(t[k + h], t[k + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int k = 0; k < 4; ++k) {
    store8(dst + k * ds, __builtin_shufflevector(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11));
    store8(dst + (k + 4) * ds,
           __builtin_shufflevector(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15));
  }
}

// rows[c * ld + j] = m[j * ms + c]: a [n, cols] matrix (rows ms apart)
// transposed, its rows padded with zeros from n to ld; in 8 x 8 blocks, the
// edges one by one.
[[gnu::always_inline]] inline void transposeInto(const float *m, int64_t ms, int64_t n,
                                                 int64_t cols, int64_t ld, float *rows) {
  const int64_t n8 = n / 8 * 8, c8 = cols / 8 * 8;
  for (int64_t j = 0; j < n8; j += 8)
    for (int64_t c = 0; c < c8; c += 8)
      transpose8x8(m + j * ms + c, ms, rows + c * ld + j, ld);
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t j = c < c8 ? n8 : 0; j < n; ++j)
      rows[c * ld + j] = m[j * ms + c];
    std::fill(rows + c * ld + n, rows + (c + 1) * ld, 0.0f);
  }
}

// s[r ss + j] = scale sum_c a[r as + c] bT[c ld + j] for R rows (R <= 4)
// and j in [0, roundup(n, 8)) (bT [cols, ld]): the sum over c in order,
// 16 keys of each row in two registers, so that every key row loaded
// from bT meets R rows of a and the 2 R sums do not wait on each other.
template <int R>
[[gnu::always_inline]] inline void tileTimesT(const float *a, int64_t as, const float *bT,
                                              int64_t cols, int64_t ld, int64_t n, float scale,
                                              float *s, int64_t ss) {
  const int64_t np = (n + 7) / 8 * 8;
  int64_t jb = 0;
  for (; jb + 16 <= np; jb += 16) {
    v8 acc[R][2] = {};
    for (int64_t c = 0; c < cols; ++c) {
      const v8 b0 = load8(bT + c * ld + jb), b1 = load8(bT + c * ld + jb + 8);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const float x = a[r * as + c];
        acc[r][0] += x * b0;
        acc[r][1] += x * b1;
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      store8(s + r * ss + jb, scale == 1.0f ? acc[r][0] : acc[r][0] * scale);
      store8(s + r * ss + jb + 8, scale == 1.0f ? acc[r][1] : acc[r][1] * scale);
    }
  }
  if (jb < np) {
    v8 acc[R] = {};
    for (int64_t c = 0; c < cols; ++c) {
      const v8 b0 = load8(bT + c * ld + jb);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        acc[r] += a[r * as + c] * b0;
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      store8(s + r * ss + jb, scale == 1.0f ? acc[r] : acc[r] * scale);
  }
}

// out[r os + c] = sum_{j in [j0, j1)} w[r wr + j wj] m[j ms + c] for R
// rows (R <= 4) and c in [0, cols), times rowScale[r] where given: the sum
// over j in order, 16 columns of each row in two registers (then 8, then
// the rest one by one).
template <int R>
[[gnu::always_inline]] inline void tileWeighted(const float *w, int64_t wr, int64_t wj,
                                                const float *m, int64_t ms, int64_t cols,
                                                int64_t j0, int64_t j1, float *out,
                                                int64_t os, const float *rowScale = nullptr) {
  auto scaled = [&](int r, auto acc) DTC_SIMD_INLINE {
    return rowScale ? acc * rowScale[r] : acc;
  };
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    v8 acc[R][2] = {};
    for (int64_t j = j0; j < j1; ++j) {
      const v8 b0 = load8(m + j * ms + c), b1 = load8(m + j * ms + c + 8);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const float x = w[r * wr + j * wj];
        acc[r][0] += x * b0;
        acc[r][1] += x * b1;
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      store8(out + r * os + c, scaled(r, acc[r][0]));
      store8(out + r * os + c + 8, scaled(r, acc[r][1]));
    }
  }
  for (; c + 8 <= cols; c += 8) {
    v8 acc[R] = {};
    for (int64_t j = j0; j < j1; ++j) {
      const v8 b0 = load8(m + j * ms + c);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        acc[r] += w[r * wr + j * wj] * b0;
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      store8(out + r * os + c, scaled(r, acc[r]));
  }
  for (; c < cols; ++c)
    for (int r = 0; r < R; ++r) {
      float acc = 0;
      for (int64_t j = j0; j < j1; ++j)
        acc += w[r * wr + j * wj] * m[j * ms + c];
      out[r * os + c] = scaled(r, acc);
    }
}

// The softmax numerators of R rows of s (ld apart) in place, in lockstep so
// that the rows' chains overlap: row r's s[j] = exp(s[j] - m[r]) for j in
// [0, n[r]), m[r] the largest of them, and zero in [n[r], roundup(nmax,
// 8)); sum[r] = the sum of the row's exponentials (eight lanes of float
// sums, lane l holding j = l mod 8, added in double in a fixed tree).
template <int R>
[[gnu::always_inline]] inline void tileSoftmax(float *s, int64_t ld, const int64_t *n,
                                               int64_t nmax, float *m, double *sum) {
  const int64_t nend = (nmax + 7) / 8 * 8;
  const v8 ninf = simd::splat8(-std::numeric_limits<float>::infinity());
  v8 mx[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
    mx[r] = ninf;
  for (int64_t j = 0; j < nend; j += 8)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const v8 x = simd::lanesBelow(n[r] - j) ? load8(s + r * ld + j) : ninf;
      mx[r] = x > mx[r] ? x : mx[r];
    }
  v8 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    mx[r] = simd::max8(mx[r]);
    acc[r] = v8{};
  }
  for (int64_t j = 0; j < nend; j += 8)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const v8 x = load8(s + r * ld + j) - mx[r];
      const v8 e = (v8)(simd::lanesBelow(n[r] - j) & (simd::v8i)simd::expNonPositive8(x));
      store8(s + r * ld + j, e);
      acc[r] += e;
    }
  using v4d = double __attribute__((vector_size(32)));
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const v4d a =
        __builtin_convertvector(__builtin_shufflevector(acc[r], acc[r], 0, 1, 2, 3), v4d) +
        __builtin_convertvector(__builtin_shufflevector(acc[r], acc[r], 4, 5, 6, 7), v4d);
    sum[r] = (a[0] + a[2]) + (a[1] + a[3]);
    m[r] = mx[r][0];
  }
}

// Query rows [i0, i0 + R) of a head's forward: their scores in s [R, ld],
// exponentiated in place (zero past each row's keys, up to the tile's last
// row's keys, so that the rows share one weighted sum of v), then out = that
// sum over each row's sum of exponentials (as torch's CPU kernel divides
// last: Dv products a row, not Tk), and lse.
template <int R>
[[gnu::always_inline]] inline void forwardTile(const float *qh, const float *kT,
                                               const float *vh, float *oh, float *lh,
                                               const Heads &h, int64_t i0, float *s) {
  const int64_t d = h.d, dv = h.dv, ld = h.tkPadded(), rq = h.rows.q, ro = h.rows.o;
  const int64_t nmax = h.keysOf(i0 + R - 1);
  if (nmax <= 0) { // no key: softmax of nothing (torch: NaN; causal tq > tk only)
    for (int r = 0; r < R; ++r) {
      std::fill(oh + (i0 + r) * ro, oh + (i0 + r) * ro + dv, 0.0f);
      lh[i0 + r] = -std::numeric_limits<float>::infinity();
    }
    return;
  }
  tileTimesT<R>(qh + i0 * rq, rq, kT, d, ld, nmax, h.scale, s, ld);
  float inv[R], m[R];
  int64_t n[R];
  double sum[R];
  for (int r = 0; r < R; ++r)
    n[r] = h.keysOf(i0 + r); // >= 1: there are keys (nmax > 0)
  tileSoftmax<R>(s, ld, n, nmax, m, sum);
  for (int r = 0; r < R; ++r) {
    inv[r] = float(1.0 / sum[r]);
    lh[i0 + r] = m[r] + std::log(float(sum[r]));
  }
  tileWeighted<R>(s, ld, 1, vh, h.rows.v, dv, 0, nmax, oh + i0 * ro, ro, inv);
}

// One head's forward (see the top): out [tq, dv] and lse [tq]; kT [d,
// tkPadded] and s [4, tkPadded] are scratch. An x86-64-v3 clone (AVX2
// and FMA) beside the baseline (simd.h; the runtime library is built for
// the baseline ISA).
DTC_SIMD_CLONES
void attentionHead(const float *__restrict__ qh, const float *__restrict__ kh,
                   const float *__restrict__ vh, float *__restrict__ oh, float *__restrict__ lh,
                   const Heads &h, float *__restrict__ kT, float *__restrict__ s) {
  transposeInto(kh, h.rows.k, h.tk, h.d, h.tkPadded(), kT);
  int64_t i0 = 0;
  for (; i0 + 4 <= h.tq; i0 += 4)
    forwardTile<4>(qh, kT, vh, oh, lh, h, i0, s);
  switch (h.tq - i0) {
  case 3:
    forwardTile<3>(qh, kT, vh, oh, lh, h, i0, s);
    break;
  case 2:
    forwardTile<2>(qh, kT, vh, oh, lh, h, i0, s);
    break;
  case 1:
    forwardTile<1>(qh, kT, vh, oh, lh, h, i0, s);
    break;
  }
}

// Query rows [i0, i0 + R) of a head's backward: their rows of P and dS
// (zero past each row's keys, to the padded end) and of dQ.
template <int R>
[[gnu::always_inline]] inline void backwardTile(const float *qh, const float *kh,
                                                const float *oh, const float *lh,
                                                const float *doh, float *dqh, const Heads &h,
                                                const float *kT, const float *vT, float *p,
                                                float *ds, int64_t i0) {
  const int64_t d = h.d, dv = h.dv, ld = h.tkPadded();
  const Heads::Rows &st = h.rows;
  const int64_t nmax = h.keysOf(i0 + R - 1);
  float *pt = p + i0 * ld, *dst = ds + i0 * ld;
  if (nmax > 0) {
    tileTimesT<R>(qh + i0 * st.q, st.q, kT, d, ld, nmax, h.scale, pt, ld);
    // dP_ij = dO_i . v_j, over the keys from vT.
    tileTimesT<R>(doh + i0 * st.dO, st.dO, vT, dv, ld, nmax, 1.0f, dst, ld);
  }
  // D_i = dO_i . O_i (= sum_j P_ij dP_ij): eight lanes of products a row,
  // then the lanes added in a fixed tree.
  float di[R];
  {
    v8 acc[R] = {};
    const int64_t c8 = dv / 8 * 8;
    for (int64_t c = 0; c < c8; c += 8)
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        acc[r] += load8(doh + (i0 + r) * st.dO + c) * load8(oh + (i0 + r) * st.o + c);
    for (int r = 0; r < R; ++r) {
      di[r] = simd::sum8(acc[r]);
      for (int64_t c = c8; c < dv; ++c)
        di[r] += doh[(i0 + r) * st.dO + c] * oh[(i0 + r) * st.o + c];
    }
  }
  // P_ij, then dS_ij = P_ij (dP_ij - D_i) scale, eight keys at a time, the
  // R rows in lockstep (their chains overlap); zero from each row's keys to
  // the tile's last.
  const int64_t nend = (std::max<int64_t>(nmax, 0) + 7) / 8 * 8;
  int64_t n[R];
  v8 l[R], dv8[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    n[r] = h.keysOf(i0 + r);
    l[r] = simd::splat8(lh[i0 + r]);
    dv8[r] = simd::splat8(di[r]);
  }
  for (int64_t jb = 0; jb < nend; jb += 8)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      float *pi = pt + r * ld + jb, *dsi = dst + r * ld + jb;
      const v8 pv = (v8)(simd::lanesBelow(n[r] - jb) &
                         (simd::v8i)simd::expNonPositive8(load8(pi) - l[r]));
      store8(pi, pv);
      store8(dsi, pv * (load8(dsi) - dv8[r]) * h.scale);
    }
  // dQ_i = sum_j dS_ij k_j
  if (nmax > 0)
    tileWeighted<R>(dst, ld, 1, kh, st.k, d, 0, nmax, dqh + i0 * st.dq, st.dq);
  else
    for (int r = 0; r < R; ++r)
      std::fill(dqh + (i0 + r) * st.dq, dqh + (i0 + r) * st.dq + d, 0.0f);
}

// Keys [j0, j0 + R): dK_j = sum_i dS_ij q_i and dV_j = sum_i P_ij dO_i over
// the rows from the first that sees key j0, in row order (the rows before
// the one that sees key j add zeros: the same floats as starting there).
template <int R>
[[gnu::always_inline]] inline void keyTile(const float *qh, const float *doh, float *dkh,
                                           float *dvh, const Heads &h, const float *p,
                                           const float *ds, int64_t j0) {
  const int64_t ld = h.tkPadded(), first = h.firstRowOf(j0);
  const Heads::Rows &st = h.rows;
  tileWeighted<R>(ds + j0, 1, ld, qh, st.q, h.d, first, h.tq, dkh + j0 * st.dk, st.dk);
  tileWeighted<R>(p + j0, 1, ld, doh, st.dO, h.dv, first, h.tq, dvh + j0 * st.dv, st.dv);
}

// One head's backward (see the top); kT [d, tkPadded], vT [dv, tkPadded],
// p and ds [tq, tkPadded] are scratch.
DTC_SIMD_CLONES
void attentionGradHead(const float *__restrict__ qh, const float *__restrict__ kh,
                       const float *__restrict__ vh, const float *__restrict__ oh,
                       const float *__restrict__ lh, const float *__restrict__ doh,
                       float *__restrict__ dqh, float *__restrict__ dkh, float *__restrict__ dvh,
                       const Heads &strided, float *__restrict__ kT, float *__restrict__ vT,
                       float *__restrict__ p, float *__restrict__ ds, float *__restrict__ copies) {
  const int64_t ld = strided.tkPadded();
  // Strided rows (interleaved heads, a packed tensor's slices): q, k and
  // dO, whose rows every tile reads again, in a contiguous copy first
  // (their rows a stride of group rows apart meet in few cache sets); the
  // rest read or written once, in place.
  Heads h = strided;
  if (copies) {
    auto gather = [](const float *x, int64_t &stride, int64_t t, int64_t cols,
                     float *to) -> const float * {
      const int64_t c8 = cols / 8 * 8;
      for (int64_t i = 0; i < t; ++i) {
        for (int64_t c = 0; c < c8; c += 8)
          store8(to + i * cols + c, load8(x + i * stride + c));
        for (int64_t c = c8; c < cols; ++c)
          to[i * cols + c] = x[i * stride + c];
      }
      stride = cols;
      return to;
    };
    qh = gather(qh, h.rows.q, h.tq, h.d, copies);
    kh = gather(kh, h.rows.k, h.tk, h.d, copies + h.tq * h.d);
    doh = gather(doh, h.rows.dO, h.tq, h.dv, copies + (h.tq + h.tk) * h.d);
  }
  transposeInto(kh, h.rows.k, h.tk, h.d, ld, kT);
  transposeInto(vh, h.rows.v, h.tk, h.dv, ld, vT);
  int64_t i0 = 0;
  for (; i0 + 4 <= h.tq; i0 += 4)
    backwardTile<4>(qh, kh, oh, lh, doh, dqh, h, kT, vT, p, ds, i0);
  switch (h.tq - i0) {
  case 3:
    backwardTile<3>(qh, kh, oh, lh, doh, dqh, h, kT, vT, p, ds, i0);
    break;
  case 2:
    backwardTile<2>(qh, kh, oh, lh, doh, dqh, h, kT, vT, p, ds, i0);
    break;
  case 1:
    backwardTile<1>(qh, kh, oh, lh, doh, dqh, h, kT, vT, p, ds, i0);
    break;
  }
  int64_t j0 = 0;
  for (; j0 + 4 <= h.tk; j0 += 4)
    keyTile<4>(qh, doh, dkh, dvh, h, p, ds, j0);
  switch (h.tk - j0) {
  case 3:
    keyTile<3>(qh, doh, dkh, dvh, h, p, ds, j0);
    break;
  case 2:
    keyTile<2>(qh, doh, dkh, dvh, h, p, ds, j0);
    break;
  case 1:
    keyTile<1>(qh, doh, dkh, dvh, h, p, ds, j0);
    break;
  }
}

// The calling thread's scratch buffer `which` of at least n floats (kept
// between calls: heads run on the same threads every step).
float *scratch(int which, int64_t n) {
  thread_local std::vector<float> buffers[5];
  std::vector<float> &b = buffers[which];
  if (b.size() < static_cast<size_t>(n))
    b.resize(static_cast<size_t>(n));
  return b.data();
}

} // namespace

void attention(const rt::HostContext &, const float *q, const float *k, const float *v,
               float *out, float *lse, int64_t heads, int64_t group, int64_t qkRows,
               int64_t vRows, int64_t tq, int64_t tk, int64_t d, int64_t dv, bool causal,
               float scale) {
  const Heads h{tq, tk, d, dv, causal, scale, group, qkRows, vRows};
  const int64_t ld = h.tkPadded(), ro = group * dv;
  rt::parallelFor(heads, 1, [&](int64_t begin, int64_t end) {
    float *kT = scratch(0, d * ld), *s = scratch(1, 4 * ld);
    for (int64_t b = begin; b < end; ++b)
      attentionHead(q + h.base(b, tq, qkRows, d), k + h.base(b, tk, qkRows, d),
                    v + h.base(b, tk, vRows, dv), out + h.base(b, tq, ro, dv), lse + b * tq, h,
                    kT, s);
  });
}

void attentionGrad(const rt::HostContext &, const float *q, const float *k, const float *v,
                   const float *out, const float *lse, const float *dout, float *dq, float *dk,
                   float *dvOut, int64_t heads, int64_t group, int64_t qkRows, int64_t vRows,
                   int64_t tq, int64_t tk, int64_t d, int64_t dv, bool causal, float scale) {
  const Heads h{tq, tk, d, dv, causal, scale, group, qkRows, vRows};
  const int64_t ld = h.tkPadded(), ro = group * dv;
  // Rows a stride of more than one row's floats apart (interleaved heads,
  // slices of a packed tensor) are copied contiguous first.
  const bool strided = qkRows != d || ro != dv;
  rt::parallelFor(heads, 1, [&](int64_t begin, int64_t end) {
    float *kT = scratch(0, d * ld), *vT = scratch(1, dv * ld), *p = scratch(2, tq * ld),
          *ds = scratch(3, tq * ld),
          *copies = strided ? scratch(4, (tq + tk) * d + tq * dv) : nullptr;
    for (int64_t b = begin; b < end; ++b)
      attentionGradHead(q + h.base(b, tq, qkRows, d), k + h.base(b, tk, qkRows, d),
                        v + h.base(b, tk, vRows, dv), out + h.base(b, tq, ro, dv), lse + b * tq,
                        dout + h.base(b, tq, ro, dv), dq + h.base(b, tq, qkRows, d),
                        dk + h.base(b, tk, qkRows, d), dvOut + h.base(b, tk, vRows, dv), h, kT,
                        vT, p, ds, copies);
  });
}

} // namespace dtc::kern
