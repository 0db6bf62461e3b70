//===- onednn.cpp - GEMM engine: oneDNN (dtc --gemm=onednn, the default) -===//
//
// oneDNN's dnnl_sgemm: JIT-generated AVX2/AVX-512 kernels that reach 84-95%
// of the core's peak on the seed MLP's large batch-64 GEMMs, where OpenBLAS
// reaches 70-80% (benchmarks/gemm_engines.sh, docs/performance.md). Each
// call runs on one thread: Debian's oneDNN threads with OpenMP, whose idle
// threads spin and would take the cores from the rank's communication
// thread. This engine splits a large product over the --threads cores
// itself (rt::parallelFor): the rows of C when it has at least as many rows
// as columns, else its columns, in contiguous blocks, at most one per
// thread.
//
//===----------------------------------------------------------------------===//
#include "gemm/engine.h"

#include "parallel.h"

#include <dnnl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// libgomp's (libdnnl's OpenMP runtime; declared here rather than through
// <omp.h>, which only an OpenMP compiler is sure to have).
extern "C" void omp_set_num_threads(int);

namespace dtc::rt::gemm_engine {
namespace {

// Below this many multiply-adds a product runs on the calling thread alone
// (waking a helper costs a few microseconds).
constexpr int64_t kMinSplitMacs = int64_t(1) << 21;

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
           const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
           int64_t ldc) {
  // OpenMP's thread count is per calling thread: one, in every thread that
  // calls oneDNN (the step's thread and parallelFor's helpers).
  thread_local bool serial = false;
  if (!serial) {
    omp_set_num_threads(1);
    serial = true;
  }
  dnnl_status_t s = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', M, N, K, alpha, A, lda,
                               B, ldb, beta, C, ldc);
  if (s != dnnl_success) {
    std::fprintf(stderr,
                 "train: error: internal error in runtime kernel: dnnl_sgemm(%c%c, M=%lld, "
                 "N=%lld, K=%lld) failed with status %d\n",
                 transA ? 'T' : 'N', transB ? 'T' : 'N', (long long)M, (long long)N,
                 (long long)K, int(s));
    std::exit(1);
  }
}

} // namespace

const char *name() {
  static const std::string n = [] {
    const dnnl_version_t *v = dnnl_version();
    return "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->patch);
  }();
  return n.c_str();
}

void setThreads(int) {
  // oneDNN generates a kernel the first time a call needs it: 4-22 ms each,
  // 30-50 ms in all for the examples, once per process. Generate them now, before the first
  // (timed) step: every transposition, beta 0, 1 and another (the folded
  // momentum's share), at the shapes that select its blocked, small-matrix
  // and matrix-vector paths.
  static bool done = false;
  if (done)
    return;
  done = true;
  const int64_t shapes[][3] = {{64, 512, 512}, {512, 512, 64}, {64, 16, 512},
                               {8, 8, 8},      {1, 256, 256},  {256, 1, 256}};
  std::vector<float> a(512 * 512, 0.5f), b(512 * 512, 0.25f), c(512 * 512, 0.0f);
  for (int t = 0; t < 4; ++t)
    for (const auto &s : shapes)
      for (float beta : {0.0f, 1.0f, 0.45f}) {
        const bool ta = t & 1, tb = t & 2;
        sgemm(ta, tb, s[0], s[1], s[2], 1.0f, a.data(), ta ? s[0] : s[2], b.data(),
              tb ? s[2] : s[1], beta, c.data(), s[1]);
      }
}

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
          const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
          int64_t ldc) {
  const int threads = kernelThreads();
  if (threads <= 1 || M * N * K < kMinSplitMacs) {
    sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  // Contiguous blocks of at least n / threads rows (columns), at most one
  // per thread (parallelFor starts blocks at multiples of 16).
  if (M >= N) {
    parallelFor(M, std::max<int64_t>(16, M / threads), [&](int64_t b, int64_t e) {
      sgemm(transA, transB, e - b, N, K, alpha, transA ? A + b : A + b * lda, lda, B, ldb,
            beta, C + b * ldc, ldc);
    });
  } else {
    parallelFor(N, std::max<int64_t>(16, N / threads), [&](int64_t b, int64_t e) {
      sgemm(transA, transB, M, e - b, K, alpha, A, lda, transB ? B + b * ldb : B + b, ldb,
            beta, C + b, ldc);
    });
  }
}

} // namespace dtc::rt::gemm_engine
