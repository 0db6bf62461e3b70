//===- mpi_plugin.h - The C interface of libdtcrt_mpi.so and libdtcrt_gloo.so ===//
//
// libdtcrt.a never links libmpi or libgloo: a program launched by mpirun/srun
// (or run with --comm mpi) dlopens libdtcrt_mpi.so, which links libmpi, and
// one launched by torchrun or described by TF_CONFIG (or run with --comm
// gloo) dlopens libdtcrt_gloo.so, which links libgloo; either's one exported
// factory returns this table of plain collective operations. Everything
// else (the communication thread, queueing, timeouts, tracing) lives
// in libdtcrt (comm_mpi.cpp). Every function but setRendezvous must be called
// from the thread that called init (MPI_THREAD_FUNNELED).
//
// Functions return 0 on success, else write a message to err[0..errLen) and
// return non-zero (MPI_COMM_WORLD uses MPI_ERRORS_RETURN; gloo's exceptions
// never leave the plugin).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <stddef.h>
#include <stdint.h>

extern "C" {

#define DTCRT_MPI_PLUGIN_ABI 3
#define DTCRT_MPI_PLUGIN_FACTORY "dtcrt_mpi_plugin"
#define DTCRT_GLOO_PLUGIN_FACTORY "dtcrt_gloo_plugin"

struct DtcrtMpiApi {
  int abi;             // DTCRT_MPI_PLUGIN_ABI
  const char *backend; // "mpi", "gloo": the communicator's backend()
  // Backends without a launcher to ask (gloo; null for MPI): the job's shape
  // and where rank 0 serves the rendezvous, set once before init. init must
  // then finish (every rank connected) within timeoutSeconds, which also
  // bounds each later operation.
  int (*setRendezvous)(int rank, int size, const char *host, int port, double timeoutSeconds,
                       char *err, size_t errLen);
  // MPI_Init_thread(MPI_THREAD_FUNNELED) on the calling thread (gloo: the
  // rendezvous and the connections to every rank); rank, size, rank and
  // size within the node (MPI_COMM_TYPE_SHARED; gloo: ranks with the same
  // host name), library version.
  int (*init)(int *rank, int *size, int *localRank, int *localSize, char *version,
              size_t versionLen, char *err, size_t errLen);
  // In place, MPI_SUM over MPI_COMM_WORLD.
  int (*allreduceFloatSum)(float *data, int64_t count, char *err, size_t errLen);
  // Sums data[0 .. shardCount * size) over the ranks and leaves this rank's
  // part of the sum (elements [rank * shardCount, (rank + 1) * shardCount))
  // in shard[0 .. shardCount). Out of place (inPlace 0), shard overlaps no
  // element of data, which is left as it was; in place (inPlace 1), shard is
  // data + rank * shardCount and the rest of data is undefined afterwards
  // (MPI_Reduce_scatter_block with MPI_IN_PLACE; gloo's
  // ReduceScatterHalvingDoubling).
  int (*reduceScatterFloatSum)(const float *data, float *shard, int64_t shardCount, int inPlace,
                               char *err, size_t errLen);
  // In place: rank r's data[r * shardCount .. (r + 1) * shardCount) reaches
  // every rank (MPI_Allgather with MPI_IN_PLACE; gloo's allgather).
  int (*allgatherFloat)(float *data, int64_t shardCount, char *err, size_t errLen);
  int (*allreduceDoubleSum)(double *data, int64_t count, char *err, size_t errLen);
  int (*broadcast)(void *data, int64_t bytes, int root, char *err, size_t errLen);
  int (*allgather)(const void *send, void *recv, int64_t bytesPerRank, char *err, size_t errLen);
  int (*barrier)(char *err, size_t errLen);
  int (*finalize)(char *err, size_t errLen);
};

typedef const DtcrtMpiApi *(*DtcrtMpiFactory)(void);

} // extern "C"
