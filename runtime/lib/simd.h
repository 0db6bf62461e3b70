//===- simd.h - Four-float vectors for the CPU kernels --------------------===//
//
// GCC's vector extension at the width every target of the runtime has (one
// SSE register on x86-64's baseline, one NEON register on AArch64): the
// kernels that the auto-vectorizer leaves scalar (selects on masks, sums
// that must keep their order, loops over a channel vector) say their
// vectors here. The runtime library is built for the baseline ISA; the
// generated step code is the host's (-march=native).
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

} // namespace dtc::simd
