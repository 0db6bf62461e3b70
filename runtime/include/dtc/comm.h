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

// One all-reduce in flight, as c10d's Work: what Communicator::allreduceStart
// returns and Communicator::wait takes. A small value (copying it starts or
// duplicates nothing); only a communicator makes one. It names the bucket
// (for messages, traces and timeouts), the communicator that started it and
// a serial number of that communicator's starts (from 1), so that waiting for
// it twice, for a stale one (its bucket was started again since), for one of
// another communicator or for a default-constructed one is an Error.
class Request {
public:
  Request() = default; // no all-reduce: waiting for it is an Error

  int bucket() const { return bucket_; }      // -1 when default-constructed
  uint64_t serial() const { return serial_; } // 0 when default-constructed
  explicit operator bool() const { return serial_ != 0; }
  friend bool operator==(const Request &a, const Request &b) {
    return a.comm_ == b.comm_ && a.serial_ == b.serial_ && a.bucket_ == b.bucket_;
  }
  friend bool operator!=(const Request &a, const Request &b) { return !(a == b); }

private:
  friend class Communicator;
  Request(uint32_t comm, int bucket, uint64_t serial)
      : comm_(comm), bucket_(bucket), serial_(serial) {}

  uint32_t comm_ = 0; // the communicator's id (unique in the process); 0: none
  int bucket_ = -1;
  uint64_t serial_ = 0; // its starts, counted from 1
};

class Communicator {
public:
  Communicator(); // takes the next id of the process
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int localRank() const = 0;
  virtual const char *backend() const = 0; // "local", "mpi", "nccl"

  // Starts summing data[0..count) in place over all ranks. (Compiled steps
  // weight each rank's gradients by StepArgs::gradSeed in backward, so the
  // sum is the average.) Non-blocking: it progresses while the caller
  // computes. `bucket` names it in messages and traces; starting a bucket
  // whose previous request has not been waited for is an Error. Returns the
  // request to wait for (dropping it leaves the bucket in flight for good).
  [[nodiscard]] virtual Request allreduceStart(int bucket, float *data, int64_t count) = 0;
  // Blocks until the all-reduce of `request` has completed; throws Error
  // naming its bucket if it does not complete within the timeout. CUDA:
  // makes the compute stream wait for it and returns at once (the runtime
  // watches the timeout when it next waits for the device). Each request is
  // waited for once: a request already waited for, a stale one, another
  // communicator's or a default-constructed one is an Error (and changes
  // nothing).
  virtual void wait(Request request) = 0;

  // Blocking collectives for the driver.
  virtual void broadcast(void *data, int64_t bytes, int root) = 0;
  virtual void allreduceSum(double *data, int64_t count) = 0;
  virtual void allgather(const void *send, void *recv, int64_t bytesPerRank) = 0;
  virtual void barrier() = 0;

protected:
  // For the backends: the request for this communicator's all-reduce number
  // `serial` (from 1, in start order) of `bucket`, and whether r is one.
  Request makeRequest(int bucket, uint64_t serial) const { return Request(id_, bucket, serial); }
  bool owns(const Request &r) const { return r.comm_ == id_ && r.serial_ != 0; }

private:
  uint32_t id_;
};

} // namespace dtc::rt
