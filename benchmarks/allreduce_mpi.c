/* The reference for dtc's all-reduce: plain MPI_Allreduce (in place, sum) of
 * N floats, timed over R repetitions after a warm-up; rank 0 prints the
 * median in microseconds. usage: mpirun -np 2 allreduce_mpi N [R] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = argc > 1 ? atol(argv[1]) : 397510;
  int reps = argc > 2 ? atoi(argv[2]) : 200;
  float *buf = calloc((size_t)n, sizeof(float));
  double *t = malloc(sizeof(double) * (size_t)reps);
  for (int i = 0; i < 10; ++i)
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double s = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t[i] = MPI_Wtime() - s;
  }
  qsort(t, (size_t)reps, sizeof(double), cmp);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    printf("%.1f\n", t[reps / 2] * 1e6);
  free(buf);
  free(t);
  MPI_Finalize();
  return 0;
}
