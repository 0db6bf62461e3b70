//===- mpi_plugin.cpp - libdtcrt_mpi.so: MPI behind a C function table ----===//
//
// Loaded with dlopen by libdtcrt (comm_mpi.cpp) only when the program runs
// under an MPI launcher or with --comm mpi, so that plain `./train` needs no
// MPI library at run time. See lib/comm/mpi_plugin.h.
//
//===----------------------------------------------------------------------===//
#include "comm/mpi_plugin.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

namespace {

// Counts per MPI call stay far below INT_MAX.
constexpr int64_t kChunk = int64_t(1) << 28;

int fail(char *err, size_t errLen, const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "error code %d", code);
  std::snprintf(err, errLen, "%s failed: %s", what, text);
  return 1;
}

int init(int *rank, int *size, int *localRank, int *localSize, char *version, size_t versionLen,
         char *err, size_t errLen) {
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS)
    return fail(err, errLen, "MPI_Init_thread", rc);
  if (provided < MPI_THREAD_FUNNELED) {
    std::snprintf(err, errLen,
                  "the MPI library provides thread level %d, below MPI_THREAD_FUNNELED", provided);
    return 1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  MPI_Comm node;
  rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS)
    return fail(err, errLen, "MPI_Comm_split_type", rc);
  MPI_Comm_rank(node, localRank);
  MPI_Comm_size(node, localSize);
  MPI_Comm_free(&node);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(lib, &len);
  std::snprintf(version, versionLen, "%s", lib);
  if (char *nl = std::strchr(version, '\n'))
    *nl = 0;
  return 0;
}

int allreduceFloatSum(float *data, int64_t count, char *err, size_t errLen) {
  for (int64_t i = 0; i < count; i += kChunk) {
    int n = int(std::min(kChunk, count - i));
    int rc = MPI_Allreduce(MPI_IN_PLACE, data + i, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
      return fail(err, errLen, "MPI_Allreduce", rc);
  }
  return 0;
}

int allreduceDoubleSum(double *data, int64_t count, char *err, size_t errLen) {
  for (int64_t i = 0; i < count; i += kChunk) {
    int n = int(std::min(kChunk, count - i));
    int rc = MPI_Allreduce(MPI_IN_PLACE, data + i, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
      return fail(err, errLen, "MPI_Allreduce", rc);
  }
  return 0;
}

int broadcast(void *data, int64_t bytes, int root, char *err, size_t errLen) {
  char *p = static_cast<char *>(data);
  for (int64_t i = 0; i < bytes; i += kChunk) {
    int n = int(std::min(kChunk, bytes - i));
    int rc = MPI_Bcast(p + i, n, MPI_BYTE, root, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS)
      return fail(err, errLen, "MPI_Bcast", rc);
  }
  return 0;
}

int allgather(const void *send, void *recv, int64_t bytesPerRank, char *err, size_t errLen) {
  if (bytesPerRank > kChunk) {
    std::snprintf(err, errLen, "allgather of %lld bytes per rank is too large",
                  static_cast<long long>(bytesPerRank));
    return 1;
  }
  int rc = MPI_Allgather(send, int(bytesPerRank), MPI_BYTE, recv, int(bytesPerRank), MPI_BYTE,
                         MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail(err, errLen, "MPI_Allgather", rc);
}

int barrier(char *err, size_t errLen) {
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail(err, errLen, "MPI_Barrier", rc);
}

int finalize(char *err, size_t errLen) {
  int rc = MPI_Finalize();
  return rc == MPI_SUCCESS ? 0 : fail(err, errLen, "MPI_Finalize", rc);
}

const DtcrtMpiApi kApi = {DTCRT_MPI_PLUGIN_ABI,
                          "mpi",
                          nullptr, // MPI's launcher is the rendezvous
                          init,
                          allreduceFloatSum,
                          allreduceDoubleSum,
                          broadcast,
                          allgather,
                          barrier,
                          finalize};

} // namespace

extern "C" __attribute__((visibility("default"))) const DtcrtMpiApi *dtcrt_mpi_plugin(void) {
  return &kApi;
}
