/* The seed MLP's five GEMMs per training step (batch 64, row-major, as
 * dtc::kern::gemm calls them), on OpenBLAS and on oneDNN, one thread each,
 * interleaved: median microseconds per shape, the sum, and the ratio.
 * Build and run: benchmarks/gemm_engines.sh */
#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(void) {
  /* transA, transB, M, N, K: forward fc1, fc2; backward dh1, dW2, dW1 */
  const struct { int ta, tb; long M, N, K; const char *what; } g[] = {
      {0, 1, 64, 500, 784, "fc1 forward  x W1^T"}, {0, 1, 64, 10, 500, "fc2 forward  h W2^T"},
      {0, 0, 64, 500, 10, "fc2 backward dy W2"},   {1, 0, 10, 500, 64, "dW2 = dy^T h"},
      {1, 0, 500, 784, 64, "dW1 = dh^T x"}};
  enum { kShapes = 5, kReps = 301 };
  omp_set_num_threads(1);
  openblas_set_num_threads(1);
  float *A = malloc(sizeof(float) << 20), *B = malloc(sizeof(float) << 20),
        *C = malloc(sizeof(float) << 20);
  for (long i = 0; i < (1 << 20); ++i) {
    A[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    B[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
  }
  static double t[2][kShapes][kReps];
  for (int warm = 0; warm < 2; ++warm)
    for (int r = 0; r < (warm ? kReps : 3); ++r)
      for (int s = 0; s < kShapes; ++s)
        for (int e = 0; e < 2; ++e) {
          long lda = g[s].ta ? g[s].M : g[s].K, ldb = g[s].tb ? g[s].K : g[s].N;
          double t0 = now();
          if (e == 0)
            cblas_sgemm(CblasRowMajor, g[s].ta ? CblasTrans : CblasNoTrans,
                        g[s].tb ? CblasTrans : CblasNoTrans, g[s].M, g[s].N, g[s].K, 1.0f, A,
                        lda, B, ldb, 0.0f, C, g[s].N);
          else
            dnnl_sgemm(g[s].ta ? 'T' : 'N', g[s].tb ? 'T' : 'N', g[s].M, g[s].N, g[s].K, 1.0f,
                       A, lda, B, ldb, 0.0f, C, g[s].N);
          if (warm)
            t[e][s][r] = now() - t0;
        }
  double sum[2] = {0, 0};
  printf("%-22s %-14s %12s %12s\n", "GEMM", "M x N x K", "OpenBLAS us", "oneDNN us");
  for (int s = 0; s < kShapes; ++s) {
    double med[2];
    for (int e = 0; e < 2; ++e) {
      qsort(t[e][s], kReps, sizeof(double), cmp);
      med[e] = t[e][s][kReps / 2] * 1e6;
      sum[e] += med[e];
    }
    char shape[32];
    snprintf(shape, sizeof shape, "%ldx%ldx%ld", g[s].M, g[s].N, g[s].K);
    printf("%-22s %-14s %12.1f %12.1f\n", g[s].what, shape, med[0], med[1]);
  }
  printf("%-22s %-14s %12.1f %12.1f   oneDNN %.2fx faster\n", "step (sum)", "", sum[0], sum[1],
         sum[0] / sum[1]);
  return 0;
}
