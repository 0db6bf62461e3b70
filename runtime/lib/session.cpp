//===- session.cpp - A model's memory, data and step arguments -----------===//
#include "session.h"

#include "checkpoint.h"
#include "params.h"

namespace dtc::rt {

Session::Session(const ModelSpec &spec, Options opts, DataSplits data)
    : spec(spec), opts(std::move(opts)), data(std::move(data)),
      persistent(static_cast<size_t>(spec.persistentBytes)),
      arena(static_cast<size_t>(spec.arenaPerSample * this->opts.batch + spec.arenaFixed)),
      batch(this->opts.batch, this->data.train),
      outputs(static_cast<size_t>(spec.numOutputs), 0.0f), hyper(spec.recipe.hyper) {
  initParams(spec, this->opts.seed, persistent.data());
  if (!this->opts.initPath.empty())
    loadCheckpoint(this->opts.initPath, spec, persistent.data());
  hyper.lr = this->opts.lr;
  hyper.step = 0;
  args.persistent = persistent.data();
  args.arena = arena.data();
  args.hyper = &hyper;
  args.outputs = outputs.data();
  args.paramGrads = nullptr;
}

void Session::loadBatch(const Dataset &ds, const int64_t *idx, int64_t n) {
  batch.gather(ds, idx, n);
  batch.bind(args);
}

std::vector<double> Session::evaluate(const Dataset &ds) {
  std::vector<double> sums(outputs.size(), 0.0);
  Sampler sampler(ds.size, opts.batch, 0, /*shuffle=*/false);
  for (int64_t b = 0; b < sampler.numBatches(); ++b) {
    int64_t n;
    const int64_t *idx = sampler.batch(b, &n);
    loadBatch(ds, idx, n);
    spec.evalStep(args);
    for (size_t i = 0; i < sums.size(); ++i)
      sums[i] += double(outputs[i]) * double(n);
  }
  for (double &s : sums)
    s /= double(std::max<int64_t>(ds.size, 1));
  return sums;
}

} // namespace dtc::rt
