//===- simd.h - Four-float vectors for the CPU kernels --------------------===//
//
// GCC's vector extension at the width every target of the runtime has (one
// SSE register on x86-64's baseline, one NEON register on AArch64): the
// kernels that the auto-vectorizer leaves scalar (selects on masks, sums
// that must keep their order, loops over a channel vector) say their
// vectors here. The runtime library is built for the baseline ISA; the
// generated step code is the host's (-march=native).
//
// Eight floats (v8) for the kernels with an AVX2 clone beside the baseline
// (target_clones): one AVX register there, two SSE ones in the baseline;
// the helpers are always inlined into the clones, so the baseline's passing
// of 32-byte vectors (-Wpsabi) never happens. exp8 is exp over eight floats
// without a call (the runtime does not depend on libmvec, which programs
// built with --static-libs do without): Cephes' expf (its range reduction
// by ln 2 in two parts and its degree-5 polynomial, within 1 ulp of
// std::exp over the range softmax uses), the same floats in every clone
// (no FMA: each operation rounds as written).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstring>

namespace dtc::simd {

using v4 = float __attribute__((vector_size(16)));
using v4i = int32_t __attribute__((vector_size(16)));

inline v4 load4(const float *p) {
  v4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float *p, v4 v) { std::memcpy(p, &v, sizeof v); }
// a where mask (all ones), else b.
inline v4 select4(v4i mask, v4 a, v4 b) {
  return (v4)(((v4i)a & mask) | ((v4i)b & ~mask));
}
// a where mask, else 0.
inline v4 keep4(v4i mask, v4 a) { return (v4)((v4i)a & mask); }

// (Not popped: the warning comes at each use in the files that include
// this, whose v8 code is inlined into clones too.)
#pragma GCC diagnostic ignored "-Wpsabi"
using v8 = float __attribute__((vector_size(32)));
using v8i = int32_t __attribute__((vector_size(32)));

[[gnu::always_inline]] inline v8 load8(const float *p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store8(float *p, v8 v) { std::memcpy(p, &v, sizeof v); }
[[gnu::always_inline]] inline v8 splat8(float x) { return v8{} + x; }

// exp(x) lane by lane: 0 below -103.97 (where expf is 0 in float), +inf
// above 88.72, NaN for NaN.
[[gnu::always_inline]] inline v8 exp8(v8 x) {
  const v8 hi = splat8(88.72283935546875f), lo = splat8(-103.97207708f);
  const v8i nan = x != x, under = x < lo, over = x > hi;
  // Within the range of a normal result, then 2^n split in two factors
  // below (n down to -150 does not fit one exponent field).
  v8 c = x > hi ? hi : x;
  c = c < lo ? lo : c;
  c = (v8)((v8i)c & ~nan); // NaN lanes 0 before the conversion to int
  // n = round(x / ln 2): floor(x log2(e) + 0.5) by truncation, corrected
  // for negative values (SSE2 has no floor).
  const v8 t = c * 1.44269504088896341f + 0.5f;
  v8i n = __builtin_convertvector(t, v8i);
  v8 fn = __builtin_convertvector(n, v8);
  const v8i above = fn > t;
  n += above; // -1 where truncation rounded up
  fn = __builtin_convertvector(n, v8);
  // r = x - n ln 2, ln 2 in two parts (the first exact in few bits).
  v8 r = c - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  const v8 r2 = r * r;
  v8 p = splat8(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  // 2^n = 2^(n - n/2) 2^(n/2), each factor a normal float.
  const v8i half = n >> 1;
  const v8 s1 = (v8)((half + 127) << 23), s2 = (v8)((n - half + 127) << 23);
  v8 y = p * s1 * s2;
  y = (v8)((v8i)y & ~under);
  y = over ? splat8(__builtin_inff()) : y;
  return nan ? x : y;
}

// The largest of the eight lanes.
[[gnu::always_inline]] inline float max8(v8 v) {
  float m = v[0];
  for (int i = 1; i < 8; ++i)
    m = v[i] > m ? v[i] : m;
  return m;
}

// The largest of x[0, n), n >= 1: eight at a time, then the rest.
[[gnu::always_inline]] inline float maxOf(const float *x, int64_t n) {
  int64_t j = 0;
  float m = x[0];
  if (n >= 8) {
    v8 mv = load8(x);
    for (j = 8; j + 8 <= n; j += 8) {
      const v8 v = load8(x + j);
      mv = v > mv ? v : mv;
    }
    m = max8(mv);
  }
  for (; j < n; ++j)
    m = x[j] > m ? x[j] : m;
  return m;
}

} // namespace dtc::simd
