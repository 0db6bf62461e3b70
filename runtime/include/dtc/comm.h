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

// The collective a Request waits for: a bucket may have one request of
// each in flight.
enum class CollectiveKind : uint8_t { Allreduce, ReduceScatter, Allgather };

// One bucket collective in flight (an all-reduce, a reduce-scatter or an
// all-gather), as c10d's Work: what Communicator::allreduceStart,
// reduceScatterStart and allgatherStart return and Communicator::wait takes.
// A small value (copying it starts or duplicates nothing); only a
// communicator makes one. It names the collective and the bucket (for
// messages, traces and timeouts), the communicator that started it and a
// serial number of that communicator's starts (from 1), so that waiting for
// it twice, for a stale one (its bucket's collective of the same kind was
// started again since), for one of another communicator or for a
// default-constructed one is an Error.
class Request {
public:
  Request() = default; // no collective: waiting for it is an Error

  CollectiveKind kind() const { return kind_; } // Allreduce when default-constructed
  int bucket() const { return bucket_; }      // -1 when default-constructed
  uint64_t serial() const { return serial_; } // 0 when default-constructed
  explicit operator bool() const { return serial_ != 0; }
  friend bool operator==(const Request &a, const Request &b) {
    return a.comm_ == b.comm_ && a.serial_ == b.serial_ && a.kind_ == b.kind_ &&
           a.bucket_ == b.bucket_;
  }
  friend bool operator!=(const Request &a, const Request &b) { return !(a == b); }

private:
  friend class Communicator;
  Request(uint32_t comm, CollectiveKind kind, int bucket, uint64_t serial)
      : comm_(comm), kind_(kind), bucket_(bucket), serial_(serial) {}

  uint32_t comm_ = 0; // the communicator's id (unique in the process); 0: none
  CollectiveKind kind_ = CollectiveKind::Allreduce;
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
  // whose previous all-reduce has not been waited for is an Error. Returns
  // the request to wait for (dropping it leaves the bucket in flight for
  // good).
  [[nodiscard]] virtual Request allreduceStart(int bucket, float *data, int64_t count) = 0;
  // Starts the reduce-scatter of a bucket (ZeRO-style sharded data
  // parallelism): sums data[0 .. shardCount * size()) over the ranks and
  // leaves this rank's part of the sum, elements [rank() * shardCount,
  // (rank() + 1) * shardCount), in shard[0 .. shardCount). shard is a buffer
  // of its own (not overlapping data; data is left as it was) or data +
  // rank() * shardCount (in place, as NCCL's in-place convention; the rest
  // of data is then undefined). Anything else is an Error. Non-blocking, and
  // waited for with wait(), as an all-reduce; a bucket may have one
  // reduce-scatter in flight besides its all-reduce and all-gather.
  [[nodiscard]] virtual Request reduceScatterStart(int bucket, float *data, float *shard,
                                                   int64_t shardCount) = 0;
  // Starts the all-gather of a bucket, in place: rank r's part
  // data[r * shardCount .. (r + 1) * shardCount) reaches every rank, which
  // ends with all size() parts. Non-blocking, and waited for with wait(), as
  // an all-reduce; a bucket may have one all-gather in flight besides its
  // all-reduce and reduce-scatter.
  [[nodiscard]] virtual Request allgatherStart(int bucket, float *data, int64_t shardCount) = 0;
  // Blocks until the collective of `request` has completed; throws Error
  // naming it and its bucket if it does not complete within the timeout.
  // CUDA: makes the compute stream wait for it and returns at once (the
  // runtime watches the timeout when it next waits for the device). Each
  // request is waited for once: a request already waited for, a stale one,
  // another communicator's or a default-constructed one is an Error (and
  // changes nothing).
  virtual void wait(Request request) = 0;

  // Blocking collectives for the driver.
  virtual void broadcast(void *data, int64_t bytes, int root) = 0;
  virtual void allreduceSum(double *data, int64_t count) = 0;
  virtual void allgather(const void *send, void *recv, int64_t bytesPerRank) = 0;
  virtual void barrier() = 0;

protected:
  // For the backends: the request for this communicator's start number
  // `serial` (from 1, in start order, over all kinds), a `kind` of `bucket`,
  // and whether r is one.
  Request makeRequest(CollectiveKind kind, int bucket, uint64_t serial) const {
    return Request(id_, kind, bucket, serial);
  }
  bool owns(const Request &r) const { return r.comm_ == id_ && r.serial_ != 0; }

private:
  uint32_t id_;
};

} // namespace dtc::rt
