//===- vector_math.h - SIMD declarations of the math generated code calls ===//
//
// The fused elementwise loops dtc generates call expf, logf, tanhf and erff
// (sigmoid, exp, log, tanh, GELU and their gradients). glibc's libmvec has
// vector versions of them (_ZGVdN8v_erff: 8 floats at once with AVX2), and
// GCC calls those from vectorized loops when the scalar function is declared
// SIMD-enabled. glibc declares them so only under -ffast-math, which dtc
// does not use (it would reorder the sums); the declarations below do it
// for these functions alone. The vector versions are as accurate as the
// scalar ones to a few ulp (glibc's libmvec tests; the parity tests against
// PyTorch hold). dtc links -lmvec with this, and defines
// DTC_NO_VECTOR_MATH where it does not (--static-libs: a program for other
// machines, whose glibc may predate libmvec's erff and tanhf, 2.35).
// Included by the generated C++ of CPU programs only.
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
