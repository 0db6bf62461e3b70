//===- session.h - A model's memory, data and step arguments for one run --===//
//
// The state shared by training, evaluation and the gradient check: the data
// splits, the persistent block (parameters + optimizer state), the arena,
// one reusable batch buffer and the StepArgs pointing at all of them. Every
// buffer is allocated once, here.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "buffer.h"
#include "data.h"
#include "dtc/runtime.h"
#include "options.h"
#include "sampler.h"

#include <vector>

namespace dtc::rt {

struct Session {
  // Allocates, initializes the parameters from opts.seed, then applies
  // opts.initPath if given.
  Session(const ModelSpec &spec, Options opts, DataSplits data);
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  // Copies samples idx[0..n) of ds into the batch buffer and binds it.
  void loadBatch(const Dataset &ds, const int64_t *idx, int64_t n);
  // Runs evalStep over ds in file order; returns the sample-weighted mean of
  // each output.
  std::vector<double> evaluate(const Dataset &ds);

  const ModelSpec &spec;
  const Options opts;
  const DataSplits data;
  AlignedBuffer persistent, arena;
  BatchBuffer batch;
  std::vector<float> outputs;
  Hyper hyper;
  StepArgs args{};
};

} // namespace dtc::rt
