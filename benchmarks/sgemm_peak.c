/* sgemm peak on this machine: C = A B for 2048x2048 matrices, median of 5
 * after a warm-up; prints GFLOP/s. OpenBLAS's cblas_sgemm (threads from
 * OPENBLAS_NUM_THREADS), or with ENGINE onednn oneDNN's dnnl_sgemm (built
 * with -DWITH_ONEDNN; threads from OMP_NUM_THREADS): dtc's default engine,
 * whose JIT kernels use more of a core with full-width AVX-512 than
 * OpenBLAS's. usage: sgemm_peak [n=2048] [openblas|onednn] */
#include <cblas.h>
#include <string.h>
#ifdef WITH_ONEDNN
#include <dnnl.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2048;
  float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
        *c = malloc(sizeof(float) * n * n);
  for (long i = 0; i < (long)n * n; ++i) {
    a[i] = (float)(i % 7) * 0.1f;
    b[i] = (float)(i % 5) * 0.1f;
  }
  double t[5];
  const int onednn = argc > 2 && strcmp(argv[2], "onednn") == 0;
#ifndef WITH_ONEDNN
  if (onednn) {
    fprintf(stderr, "sgemm_peak: built without oneDNN\n");
    return 2;
  }
#endif
  for (int r = -1; r < 5; ++r) {
    double s = now();
#ifdef WITH_ONEDNN
    if (onednn)
      dnnl_sgemm('N', 'N', n, n, n, 1, a, n, b, n, 0, c, n);
    else
#endif
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    if (r >= 0)
      t[r] = now() - s;
  }
  qsort(t, 5, sizeof(double), cmp);
  printf("%.1f\n", 2.0 * n * n * (double)n / t[2] / 1e9);
  free(a); free(b); free(c);
  return 0;
}
