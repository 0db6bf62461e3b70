//===- session.cpp - A model's memory, data and step arguments -----------===//
#include "session.h"

#include "checkpoint.h"
#include "error.h"
#include "params.h"

#include <algorithm>

namespace dtc::rt {

Session::Session(const ModelSpec &spec, Options opts, DataSplits data, CommBase &comm,
                 bool hostSteps, const std::vector<char> *resumed)
    : spec(spec), opts(std::move(opts)), data(std::move(data)), comm(comm),
      persistent(static_cast<size_t>(spec.persistentBytes)),
      arena(hostSteps ? static_cast<size_t>(arenaBytes(spec, this->opts.batch)) : 0),
      batch(hostSteps ? this->opts.batch : 0, this->data.train),
      outputs(static_cast<size_t>(spec.numOutputs), 0.0f), hyper(spec.recipe.hyper) {
  const bool resume = resumed != nullptr && !resumed->empty();
  if (resume) {
    if (int64_t(resumed->size()) != spec.persistentBytes)
      throw Error("internal error: the resumed state does not fit the persistent block");
    std::copy(resumed->begin(), resumed->end(), persistent.data());
  } else {
    initParams(spec, this->opts.seed, persistent.data());
    if (!this->opts.initPath.empty() && comm.rank() == 0)
      loadCheckpoint(this->opts.initPath, spec, persistent.data());
  }
  // A resumed run: every rank gets rank 0's parameters and optimizer state
  // (whether the others were given a state or not).
  const bool resumedAnywhere = this->opts.resumeActive;
  if (comm.size() > 1)
    comm.broadcast(persistent.data(), resumedAnywhere ? spec.persistentBytes : spec.paramBytes, 0);
  hyper.lr = this->opts.lr;
  hyper.step = 0;
  args.persistent = persistent.data();
  args.arena = arena.data();
  args.hyper = &hyper;
  args.outputs = outputs.data();
  args.paramGrads = nullptr;
  args.comm = &comm;
  args.gradSeed = 1.0f;
  args.trace = nullptr;
  args.device = nullptr;
}

void Session::loadBatch(const Dataset &ds, const int64_t *idx, int64_t n) {
  batch.gather(ds, idx, n);
  batch.bind(args);
}

} // namespace dtc::rt
