/* OpenBLAS sgemm peak on this machine: C = A B for 2048x2048 matrices,
 * median of 5 after a warm-up; prints GFLOP/s. The threads come from
 * OPENBLAS_NUM_THREADS. usage: sgemm_peak [n=2048] */
#include <cblas.h>
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
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
  for (int r = 0; r < 5; ++r) {
    double s = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    t[r] = now() - s;
  }
  qsort(t, 5, sizeof(double), cmp);
  printf("%.1f\n", 2.0 * n * n * (double)n / t[2] / 1e9);
  free(a); free(b); free(c);
  return 0;
}
