//===- engine.h - The CPU GEMM engine a program is linked with -----------===//
//
// kern::gemm (kernels.cpp) handles the degenerate shapes and hands every
// real product to the engine. Exactly one engine is linked into a program,
// as an object file placed before libdtcrt.a, so always linked whole (dtc
// --gemm):
//   gemm/onednn.cpp    oneDNN's JIT sgemm (the default where Debian's
//                      libdnnl-dev was found; its GEMMs of the seed MLP
//                      take 14% less time than OpenBLAS's), split over the
//                      --threads cores by rt::parallelFor
//   gemm/openblas.cpp  OpenBLAS's cblas_sgemm with its own threads; the
//                      engine of --static-libs (Debian ships no static oneDNN)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "dtc/runtime.h"

#include <cstdint>

namespace dtc::rt::gemm_engine {

// "onednn 2.6.3", "openblas (OpenBLAS 0.3.21 ...)": for train --version.
const char *name();

// The cores GEMMs may use (the caller included). Called once before the
// first step, from the thread that runs the steps; an engine that generates
// its kernels at first use generates them here, outside the timed steps.
void setThreads(int threads);

// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major with leading
// dimensions lda, ldb, ldc; M, N, K >= 1. beta == 0 never reads C.
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
          const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
          int64_t ldc);

// count products C_i = alpha op(A_i) op(B_i) + beta C_i, each operand's
// matrices stored one after another (A_i at A + i M K, ...), contiguous
// (lda = transA ? M : K, ldb = transB ? K : N, ldc = N); M, N, K >= 1.
// The engine spreads them over the --threads cores (small products) or each
// product (large ones).
void gemmBatched(bool transA, bool transB, int64_t count, int64_t M, int64_t N, int64_t K,
                 float alpha, const float *A, const float *B, float beta, float *C);

// Convolutions of N NCHW samples (kern::conv2d and its gradients,
// kernels.h): true when the engine computed it, false when it has no
// convolution of its own (OpenBLAS), and the caller runs im2col + gemm.
// bias (added to each output channel) and db (the bias's gradient) may be
// null.
bool conv2d(const Window2d &w, int64_t N, const float *x, const float *weight, const float *bias,
            float *y);
bool conv2dGradInput(const Window2d &w, int64_t N, const float *dy, const float *weight,
                     float *dx);
bool conv2dGradWeight(const Window2d &w, int64_t N, const float *x, const float *dy,
                      float *dw, float *db);

} // namespace dtc::rt::gemm_engine
