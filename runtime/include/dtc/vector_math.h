//===- vector_math.h - SIMD declarations of the math generated code calls ===//
//
// The fused elementwise loops dtc generates call expf, logf, tanhf and erff
// (sigmoid, exp, log, tanh, GELU and their gradients). glibc's libmvec has
// vector versions of them (_ZGVdN8v_erff: 8 floats at once with AVX2), and
// GCC calls those from vectorized loops when the scalar function is declared
// SIMD-enabled. glibc declares them so only under -ffast-math, which dtc
// does not use (it would reorder the sums); the declarations below do it
// for these functions alone. The vector versions are within 4 ulp (glibc's
// bound for libmvec; measured here: erff 1.9 ulp with AVX2, expf 2.6, logf
// 3.6, tanhf 1.4; the scalar ones within 0.5-2.1), so an element's last bits
// may depend on whether it falls in a loop's vector body or its remainder;
// the parity tests against PyTorch hold with their tolerances. dtc links
// -lmvec with this and defines DTC_NO_VECTOR_MATH with --static-libs: such
// a program is for other machines, and erff and tanhf would raise the glibc
// it needs from 2.34 (any program built on Debian 12) to 2.35. Included by
// the generated C++ of CPU programs only.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                        \
    defined(__GLIBC__) && (__GLIBC__ * 100 + __GLIBC_MINOR__ >= 235) &&                        \
    !defined(DTC_NO_VECTOR_MATH)
#define DTC_VECTOR_MATH 1
extern "C" {
__attribute__((simd("notinbranch"))) float expf(float) noexcept;
__attribute__((simd("notinbranch"))) float logf(float) noexcept;
__attribute__((simd("notinbranch"))) float tanhf(float) noexcept;
__attribute__((simd("notinbranch"))) float erff(float) noexcept;
}
#endif
