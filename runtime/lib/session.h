//===- session.h - A model's memory, data and step arguments for one run --===//
//
// The state shared by training, evaluation and the gradient check: the data
// splits, the persistent block (parameters + optimizer state), the arena,
// one reusable batch buffer, the communicator and the StepArgs pointing at
// all of them. Every buffer is allocated once, here.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "buffer.h"
#include "comm_impl.h"
#include "data.h"
#include "dtc/runtime.h"
#include "options.h"
#include "sampler.h"

#include <vector>

namespace dtc::rt {

struct Session {
  // Allocates, initializes the parameters from opts.seed, then (rank 0 only)
  // applies opts.initPath if given, then broadcasts rank 0's parameters to
  // all ranks. Optimizer state starts at zero.
  Session(const ModelSpec &spec, Options opts, DataSplits data, CommBase &comm);
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  // Copies samples idx[0..n) of ds into the batch buffer and binds it.
  void loadBatch(const Dataset &ds, const int64_t *idx, int64_t n);
  // Runs evalStep over ds in file order, each rank on its contiguous part
  // (rank r: samples [r*N/W, (r+1)*N/W)); returns the sample-weighted mean
  // of each output over the whole of ds (one allreduceSum).
  std::vector<double> evaluate(const Dataset &ds);

  const ModelSpec &spec;
  const Options opts;
  const DataSplits data;
  CommBase &comm;
  AlignedBuffer persistent, arena;
  BatchBuffer batch;
  std::vector<float> outputs;
  Hyper hyper;
  StepArgs args{};
};

} // namespace dtc::rt
