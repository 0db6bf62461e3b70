//===- device_comm.h - Communicators whose all-reduces run on the device --===//
//
// Under CUDA, StepArgs::comm is a DeviceComm: the bucket collectives
// (allreduceStart, reduceScatterStart, allgatherStart) and wait take device
// pointers and order work on CUDA streams instead of blocking the host (see
// dtc/cuda.h). Two of them:
//   local  one rank: allreduceStart, allgatherStart and wait do nothing; an
//          out-of-place reduceScatterStart copies the data to the shard on
//          the compute stream.
//   nccl   each start records an event on the compute stream, makes the
//          communication stream wait for it, runs the collective there
//          (ncclAllReduce(ncclSum) in place, the gradients weighted by
//          StepArgs::gradSeed; ncclReduceScatter(ncclSum); ncclAllGather in
//          place) and records the done event of the bucket's slot for that
//          kind; wait makes the compute stream wait for that event.
// The driver's blocking collectives (host memory) go through the MPI
// communicator NCCL was bootstrapped with, else through NCCL (staged through
// device memory).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "comm/comm_impl.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace dtc::rt {

struct Options;

class DeviceComm : public CommBase {
public:
  using CommBase::CommBase;

  // The stream the steps run on (set by the executor before any step).
  virtual void setComputeStream(cudaStream_t stream) = 0;
  virtual int device() const = 0;
  // Whether a step can wait forever on another rank (NCCL with several
  // ranks): the executor then polls with the --comm-timeout watchdog.
  virtual bool canHang() const { return false; }
  // "all-reduce of bucket 3 (fc1.weight)" for the oldest bucket collective
  // started and not yet complete on the device; empty when none, or "NCCL
  // error: ..." when NCCL reported an asynchronous error.
  virtual std::string stalled() { return {}; }
  // "NCCL error: ..." when NCCL reported an asynchronous error (a peer's
  // connection lost, ...); empty otherwise. Cheap: polled while waiting.
  virtual std::string asyncError() { return {}; }
  // Prints "train: error: [rank R: ]message", aborts NCCL and ends the
  // process (a rank stuck in a collective cannot shut down cleanly).
  [[noreturn]] void abortJob(const std::string &message);

protected:
  virtual void abortCollectives() {}
};

// Selects the device (localRank % device count) and makes the communicator;
// see DeviceBackend::createCommunicator (executor.h).
std::unique_ptr<CommBase> createDeviceCommunicator(std::unique_ptr<CommBase> base, bool nccl,
                                                   const LaunchInfo &launch, const Options &opts);

} // namespace dtc::rt
