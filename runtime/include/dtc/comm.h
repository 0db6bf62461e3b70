//===- comm.h - Communication between data-parallel ranks -----------------===//
//
// The one interface through which compiled steps and the driver talk to the
// other ranks. Backends: a single-rank one (no MPI needed at run time) and
// MPI (OpenMPI), loaded when the program is launched by mpirun or srun; for
// CUDA steps (dtc/cuda.h), a one-rank device communicator and NCCL, which
// take device pointers and order work on CUDA streams instead of blocking.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace dtc::rt {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int localRank() const = 0;
  virtual const char *backend() const = 0; // "local", "mpi", "nccl"

  // Starts summing data[0..count) in place over all ranks. (Compiled steps
  // weight each rank's gradients by StepArgs::gradSeed in backward, so the
  // sum is the average.) Non-blocking: it progresses while the caller
  // computes. `bucket` names the request.
  virtual void allreduceStart(int bucket, float *data, int64_t count) = 0;
  // Blocks until the all-reduce of `bucket` has completed; throws Error
  // naming the bucket if it does not complete within the timeout. CUDA:
  // makes the compute stream wait for it and returns at once (the runtime
  // watches the timeout when it next waits for the device).
  virtual void wait(int bucket) = 0;

  // Blocking collectives for the driver.
  virtual void broadcast(void *data, int64_t bytes, int root) = 0;
  virtual void allreduceSum(double *data, int64_t count) = 0;
  virtual void allgather(const void *send, void *recv, int64_t bytesPerRank) = 0;
  virtual void barrier() = 0;
};

} // namespace dtc::rt
