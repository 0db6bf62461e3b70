//===- session.h - A model's memory, data and step arguments for one run --===//
//
// The state shared by training, evaluation and the gradient check: the data
// splits, the persistent block (parameters + optimizer state), the arena,
// one reusable batch buffer, the communicator and the StepArgs pointing at
// all of them. Every buffer is allocated once, here. The CPU executor
// (executor.h) runs the steps on these buffers; a device executor keeps its
// own copies on the device and uses the host parameters only to start from
// and for --save.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "support/buffer.h"
#include "comm/comm_impl.h"
#include "data/data.h"
#include "dtc/runtime.h"
#include "options/options.h"
#include "data/sampler.h"

#include <algorithm>
#include <vector>

namespace dtc::rt {

// Bytes of a step arena for `batch` samples: the fixed region, the
// per-sample region, and 64 bytes of slack (a step may start its per-sample
// region at its fixed size rounded up to 64).
// With `gradcheck`, large enough for the gradient-only step too.
inline int64_t arenaBytes(const ModelSpec &spec, int64_t batch, bool gradcheck = false) {
  const int64_t fixed = gradcheck ? std::max(spec.arenaFixed, spec.gradArenaFixed) : spec.arenaFixed;
  const int64_t perSample =
      gradcheck ? std::max(spec.arenaPerSample, spec.gradArenaPerSample) : spec.arenaPerSample;
  return fixed + perSample * batch + 64;
}

// Throws Error unless the memory of a step for opts.batch samples (arena
// and batch buffer; with hostSteps, in host memory) can be computed without
// overflow and, for host steps, fits this machine's memory. Sizes that come
// from the command line are checked here before anything is allocated.
void checkStepMemory(const ModelSpec &spec, int64_t batch, bool hostSteps);

struct Session {
  // Allocates, initializes the parameters from opts.seed and the buffers to
  // their values, then (rank 0 only) applies opts.initPath if given, then
  // broadcasts rank 0's parameters and buffers to all ranks; optimizer
  // state starts at zero. With `resumed` (rank 0: a
  // persistent block read from a training state; other ranks: null or
  // empty), rank 0's parameters and optimizer state are that block's instead,
  // and all of it is broadcast. hostSteps false (a device executor runs the
  // steps): no host arena or batch buffer.
  Session(const ModelSpec &spec, Options opts, DataSplits data, CommBase &comm,
          bool hostSteps = true, const std::vector<char> *resumed = nullptr);
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  // Copies samples idx[0..n) of ds into the batch buffer and binds it.
  void loadBatch(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t draw = 0);
  // Waits for the collectives the steps left in flight (StepArgs::carried):
  // before the parameters are read outside a step, and before the run ends.
  void finishCarried();

  const ModelSpec &spec;
  const Options opts;
  const DataSplits data;
  CommBase &comm;
  AlignedBuffer persistent, arena;
  BatchBuffer batch;
  std::vector<float> outputs;
  std::vector<Request> carried; // StepArgs::carried, one slot a bucket
  Hyper hyper;
  StepArgs args{};
};

} // namespace dtc::rt
