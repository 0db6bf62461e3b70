//===- mpi_plugin.h - The C interface of libdtcrt_mpi.so ------------------===//
//
// libdtcrt.a never links libmpi: a program launched by mpirun/srun (or run
// with --comm mpi) dlopens libdtcrt_mpi.so, which links libmpi, and calls its
// one exported factory for this table of plain MPI operations. Everything
// else (the communication thread, queueing, timeouts, tracing) lives
// in libdtcrt (comm_mpi.cpp). Every function must be called from the thread that
// called init (MPI_THREAD_FUNNELED).
//
// Functions return 0 on success, else write a message to err[0..errLen) and
// return non-zero (MPI_COMM_WORLD uses MPI_ERRORS_RETURN).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <stddef.h>
#include <stdint.h>

extern "C" {

#define DTCRT_MPI_PLUGIN_ABI 1
#define DTCRT_MPI_PLUGIN_FACTORY "dtcrt_mpi_plugin"

struct DtcrtMpiApi {
  int abi; // DTCRT_MPI_PLUGIN_ABI
  // MPI_Init_thread(MPI_THREAD_FUNNELED) on the calling thread; rank, size,
  // rank and size within the node (MPI_COMM_TYPE_SHARED), library version.
  int (*init)(int *rank, int *size, int *localRank, int *localSize, char *version,
              size_t versionLen, char *err, size_t errLen);
  // In place, MPI_SUM over MPI_COMM_WORLD.
  int (*allreduceFloatSum)(float *data, int64_t count, char *err, size_t errLen);
  int (*allreduceDoubleSum)(double *data, int64_t count, char *err, size_t errLen);
  int (*broadcast)(void *data, int64_t bytes, int root, char *err, size_t errLen);
  int (*allgather)(const void *send, void *recv, int64_t bytesPerRank, char *err, size_t errLen);
  int (*barrier)(char *err, size_t errLen);
  int (*finalize)(char *err, size_t errLen);
};

typedef const DtcrtMpiApi *(*DtcrtMpiFactory)(void);

} // extern "C"
