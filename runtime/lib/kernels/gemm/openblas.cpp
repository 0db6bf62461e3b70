//===- openblas.cpp - GEMM engine: OpenBLAS (dtc --gemm=openblas) --------===//
//
// cblas_sgemm, threaded by OpenBLAS itself. The engine of --static-libs:
// Debian ships libopenblas.a, but no static oneDNN.
//
//===----------------------------------------------------------------------===//
#include "kernels/gemm/engine.h"

#include "kernels/parallel.h"

#include <cblas.h>

#include <string>

extern "C" void openblas_set_num_threads(int);
extern "C" char *openblas_get_config(void);

namespace dtc::rt::gemm_engine {

const char *name() {
  static const std::string n = std::string("openblas (") + openblas_get_config() + ")";
  return n.c_str();
}

void setThreads(int threads) {
  openblas_set_num_threads(threads);
  // OpenBLAS's threads run the GEMMs: parallelFor's helpers (the updates,
  // the row kernels) leave them the cores soon after each job.
  setHelperSpin(20);
}

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
          const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
          int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
              ldc);
}

// One call per product (OpenBLAS's own threads split each); this
// OpenBLAS has no batched interface.
void gemmBatched(bool transA, bool transB, int64_t count, int64_t M, int64_t N, int64_t K,
                 float alpha, const float *A, const float *B, float beta, float *C) {
  for (int64_t i = 0; i < count; ++i)
    gemm(transA, transB, M, N, K, alpha, A + i * M * K, transA ? M : K, B + i * K * N,
         transB ? K : N, beta, C + i * M * N, N);
}

// No convolutions of its own: im2col + gemm (conv.cpp).
bool conv2d(const Window2d &, int64_t, const float *, const float *, const float *, float *) {
  return false;
}
bool conv2dGradInput(const Window2d &, int64_t, const float *, const float *, float *) {
  return false;
}
bool conv2dGradWeight(const Window2d &, int64_t, const float *, const float *, float *, float *) {
  return false;
}

} // namespace dtc::rt::gemm_engine
