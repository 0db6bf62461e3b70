//===- session.cpp - A model's memory, data and step arguments -----------===//
#include "session.h"

#include "checkpoint.h"
#include "params.h"

#include <algorithm>
#include <numeric>

namespace dtc::rt {

Session::Session(const ModelSpec &spec, Options opts, DataSplits data, CommBase &comm)
    : spec(spec), opts(std::move(opts)), data(std::move(data)), comm(comm),
      persistent(static_cast<size_t>(spec.persistentBytes)),
      arena(static_cast<size_t>(spec.arenaPerSample * this->opts.batch + spec.arenaFixed)),
      batch(this->opts.batch, this->data.train),
      outputs(static_cast<size_t>(spec.numOutputs), 0.0f), hyper(spec.recipe.hyper) {
  initParams(spec, this->opts.seed, persistent.data());
  if (!this->opts.initPath.empty() && comm.rank() == 0)
    loadCheckpoint(this->opts.initPath, spec, persistent.data());
  if (comm.size() > 1)
    comm.broadcast(persistent.data(), spec.paramBytes, 0);
  hyper.lr = this->opts.lr;
  hyper.step = 0;
  args.persistent = persistent.data();
  args.arena = arena.data();
  args.hyper = &hyper;
  args.outputs = outputs.data();
  args.paramGrads = nullptr;
  args.comm = &comm;
  args.gradScale = 1.0f;
  args.trace = nullptr;
}

void Session::loadBatch(const Dataset &ds, const int64_t *idx, int64_t n) {
  batch.gather(ds, idx, n);
  batch.bind(args);
}

std::vector<double> Session::evaluate(const Dataset &ds) {
  // sums[i]: output i weighted by batch sizes; sums.back(): samples.
  std::vector<double> sums(outputs.size() + 1, 0.0);
  const int64_t W = comm.size(), r = comm.rank();
  const int64_t begin = ds.size * r / W, end = ds.size * (r + 1) / W;
  std::vector<int64_t> idx(static_cast<size_t>(std::min(opts.batch, end - begin)));
  for (int64_t b = begin; b < end; b += opts.batch) {
    const int64_t n = std::min(opts.batch, end - b);
    std::iota(idx.begin(), idx.begin() + n, b);
    loadBatch(ds, idx.data(), n);
    spec.evalStep(args);
    for (size_t i = 0; i < outputs.size(); ++i)
      sums[i] += double(outputs[i]) * double(n);
    sums.back() += double(n);
  }
  comm.allreduceSum(sums.data(), int64_t(sums.size()));
  const double total = std::max(sums.back(), 1.0);
  sums.pop_back();
  for (double &s : sums)
    s /= total;
  return sums;
}

} // namespace dtc::rt
