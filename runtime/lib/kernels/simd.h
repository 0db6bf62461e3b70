//===- simd.h - Four-float vectors for the CPU kernels --------------------===//
//
// GCC's vector extension at the width every target of the runtime has (one
// SSE register on x86-64's baseline, one NEON register on AArch64): the
// kernels that the auto-vectorizer leaves scalar (selects on masks, sums
// that must keep their order, loops over a channel vector) say their
// vectors here. The runtime library is built for the baseline ISA; the
// generated step code is the host's (-march=native).
//
// Eight floats (v8) for the kernels with an x86-64-v3 clone (AVX2 and FMA)
// beside the baseline (DTC_SIMD_CLONES): one AVX register there, two SSE
// ones in the baseline; the helpers are always inlined into the clones, so
// the baseline's passing of 32-byte vectors (-Wpsabi) never happens. The
// clones' floats differ where the compiler contracts a product and a sum
// into one FMA (as the generated code's, built for the host, and oneDNN's
// do): a host's results repeat bit for bit, at any --threads, but not
// across hosts with and without AVX2. exp8 is exp over eight floats
// without a call (the runtime does not depend on libmvec, which programs
// built with --static-libs do without): Cephes' expf (its range reduction
// by ln 2 in two parts and its degree-5 polynomial, within 1 ulp of
// std::exp), n = round(x / ln 2) by the 1.5 * 2^23 rounding trick.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstring>

// A kernel's x86-64-v3 clone beside the baseline, chosen at load time.
#define DTC_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
// A lambda always inlined, for lambdas that take or return v8 inside the
// clones' kernels (a call passing 32-byte vectors in the baseline clone
// would change the ABI: -Wpsabi).
#define DTC_SIMD_INLINE __attribute__((always_inline))
// An AVX2 clone without FMA: each operation rounds as written, the same
// floats as the baseline and as the scalar definition (the optimizers'
// updates, memory-bound, which tests compare bit for bit).
#define DTC_SIMD_CLONES_NO_FMA __attribute__((target_clones("avx2", "default")))

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

// Lanes [0, k) all ones, the others zero (k in [0, 8]).
[[gnu::always_inline]] inline v8i lanesBelow(int64_t k) {
  const v8i iota = {0, 1, 2, 3, 4, 5, 6, 7};
  return iota < v8i{} + int32_t(k);
}

// exp(c) for c in [-87, 88.72] (or NaN): Cephes' expf, see the top; 0 for
// c below about -86.99 (2^n past the normal range).
[[gnu::always_inline]] inline v8 expClamped8(v8 c) {
  // n = round(c / ln 2): adding 1.5 * 2^23 rounds the product to an
  // integer, which the low bits of the sum then hold.
  const v8 magic = splat8(12582912.0f);
  const v8 t = c * 1.44269504088896341f + magic;
  const v8 fn = t - magic;
  const v8i n = (v8i)t - (v8i)magic;
  // r = c - n ln 2, ln 2 in two parts (the first exact in few bits).
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
  // 2^n = 2^(n - 1) 2: the field n - 1 + 127 is in [1, 254] for n in
  // [-125, 128], and 0 (a zero factor) at n = -126, where exp(c) < 2^-125.
  return p * (v8)((n + 126) << 23) * 2.0f;
}

// exp(x) lane by lane, within 1 ulp of the correctly rounded result where
// that is at least 2^-125 (about 2.4e-38); smaller results are 0 (not
// denormals: softmax, the only user, adds them to sums of at least 1),
// +inf above 88.72, NaN for NaN.
[[gnu::always_inline]] inline v8 exp8(v8 x) {
  // Clamped (a NaN lane passes: its comparisons are false).
  v8 c = x < -87.0f ? splat8(-87.0f) : x;
  c = c > 88.72283935546875f ? splat8(88.72283935546875f) : c;
  const v8 y = expClamped8(c);
  return x > 88.72283935546875f ? splat8(__builtin_inff()) : y;
}

// exp8 for x <= 0 (softmax's x - max, or x - its log-sum-exp), NaN for NaN;
// lanes above 0 (a padded row's masked tail) get unspecified values. Four
// operations fewer than exp8.
[[gnu::always_inline]] inline v8 expNonPositive8(v8 x) {
  return expClamped8(x < -87.0f ? splat8(-87.0f) : x);
}

// The sum of the eight lanes, in a fixed tree: ((l0 + l4) + (l2 + l6)) +
// ((l1 + l5) + (l3 + l7)).
[[gnu::always_inline]] inline float sum8(v8 v) {
  const v8 a = v + __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
  const v8 b = a + __builtin_shufflevector(a, a, 2, 3, 0, 1, 6, 7, 4, 5);
  return b[0] + b[1];
}

// The largest of the eight lanes, in every lane.
[[gnu::always_inline]] inline v8 max8(v8 v) {
  v8 t = __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
  v = t > v ? t : v;
  t = __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
  v = t > v ? t : v;
  t = __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
  return t > v ? t : v;
}

// The largest of x[0, n), n >= 1, in every lane: eight at a time, the
// last vector's lanes past n left out (copied out first: x may end at n).
[[gnu::always_inline]] inline v8 maxOf(const float *x, int64_t n) {
  const v8 ninf = splat8(-__builtin_inff());
  const int64_t full = n / 8 * 8;
  v8 m = ninf;
  for (int64_t j = 0; j < full; j += 8) {
    const v8 v = load8(x + j);
    m = v > m ? v : m;
  }
  if (full < n) {
    v8 v = ninf;
    std::memcpy(&v, x + full, size_t(n - full) * sizeof(float));
    m = v > m ? v : m;
  }
  return max8(m);
}

} // namespace dtc::simd
