//===- session.cpp - A model's memory, data and step arguments -----------===//
#include "train/session.h"

#include "checkpoint/checkpoint.h"
#include "support/error.h"
#include "checkpoint/params.h"
#include "checkpoint/shards.h"
#include "comm/comm_impl.h"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

namespace dtc::rt {

void checkStepMemory(const ModelSpec &spec, int64_t batch, bool hostSteps) {
  int64_t arena = 0, sample = 0, batchBytes = 0, total = 0;
  const int64_t perSample = std::max(spec.arenaPerSample, spec.gradArenaPerSample);
  const int64_t fixed = std::max(spec.arenaFixed, spec.gradArenaFixed);
  bool overflow = __builtin_mul_overflow(perSample, batch, &arena);
  overflow |= __builtin_add_overflow(arena, fixed + 64, &arena);
  overflow |= __builtin_add_overflow(spec.inputNumel, spec.labelNumel, &sample);
  overflow |= __builtin_mul_overflow(sample, int64_t(4), &sample);
  overflow |= __builtin_mul_overflow(sample, batch, &batchBytes);
  overflow |= __builtin_add_overflow(arena, batchBytes, &total);
  const long pages = ::sysconf(_SC_PHYS_PAGES), pageSize = ::sysconf(_SC_PAGE_SIZE);
  const double memory = pages > 0 && pageSize > 0 ? double(pages) * double(pageSize) : 0;
  if (overflow || (hostSteps && memory > 0 && double(total) > memory))
    throw Error(fmt::format(
        "--batch {}: a step of {} samples needs {} (the arena: {} bytes per sample + {} "
        "fixed; the batch: {} bytes per sample){}; use a smaller --batch",
        batch, batch, overflow ? std::string("more than 2^63 bytes")
                               : fmt::format("{:.3g} GB", double(total) / 1e9),
        spec.arenaPerSample, spec.arenaFixed, sample,
        overflow ? "" : fmt::format(", more than this machine's {:.3g} GB", memory / 1e9)));
}

Session::Session(const ModelSpec &spec, Options opts, DataSplits data, CommBase &comm,
                 bool hostSteps, const std::vector<char> *resumed)
    : spec(spec), opts(std::move(opts)), data(std::move(data)), comm(comm),
      persistent(static_cast<size_t>(spec.persistentBytes)),
      arena(hostSteps ? static_cast<size_t>(arenaBytes(spec, this->opts.batch,
                                                       this->opts.gradcheck))
                      : 0),
      batch(hostSteps ? this->opts.batch : 0, this->data.train),
      outputs(static_cast<size_t>(spec.numOutputs), 0.0f), hyper(spec.recipe.hyper) {
  if (spec.shardStage > 0 && comm.size() != spec.shardRanks)
    throw CollectiveError(fmt::format(
        "this program shards its {} over {} ranks (dtc --shard --ranks {}), and was started "
        "on {}: start {} ranks, or compile it again with --ranks {}",
        spec.shardStage == 1   ? "optimizer state"
        : spec.shardStage == 2 ? "optimizer state and gradients"
                               : "optimizer state, gradients and parameters",
        spec.shardRanks, spec.shardRanks, comm.size(), spec.shardRanks, comm.size()));
  const bool resume = resumed != nullptr && !resumed->empty();
  // Sharded: the state gathered after the block (rank 0's, broadcast); stage
  // 3: then the parameters' image.
  const int64_t gathered = gatheredStateFloats(spec) * int64_t(sizeof(float));
  const bool shardedParams = spec.shardStage == 3;
  const int64_t image = shardedParams ? paramImageBytes(spec) : 0;
  if (resume) {
    if (int64_t(resumed->size()) != spec.persistentBytes + gathered + image)
      throw Error("internal error: the resumed state does not fit the persistent block");
    std::copy(resumed->begin(), resumed->begin() + spec.persistentBytes, persistent.data());
  } else if (shardedParams) {
    // Each rank its shards, as the whole would be initialized; --init: each
    // rank reads the file.
    initBuffers(spec, persistent.data());
    initShardedParams(spec, this->opts.seed, comm.rank(), persistent.data());
    if (!this->opts.initPath.empty()) { // rank 0 reads it, a bucket at a time to each
      std::vector<char> whole(comm.rank() == 0 ? static_cast<size_t>(image) : 0);
      if (comm.rank() == 0)
        loadCheckpoint(this->opts.initPath, spec, persistent.data(), whole.data());
      scatterParamImage(spec, comm, whole.data(), persistent.data());
    }
  } else {
    initParams(spec, this->opts.seed, persistent.data());
    if (!this->opts.initPath.empty() && comm.rank() == 0)
      loadCheckpoint(this->opts.initPath, spec, persistent.data());
  }
  // Every rank gets rank 0's parameters and buffers (as DDP broadcasts a
  // module's state at construction); a resumed run also its optimizer state
  // (whether the others were given a state or not). Stage 3: the buffers
  // only (each rank has its own shards of the parameters).
  const bool resumedAnywhere = this->opts.resumeActive;
  if (comm.size() > 1) {
    if (shardedParams)
      comm.broadcast(persistent.data() + spec.paramBytes, spec.bufferBytes, 0);
    else
      comm.broadcast(persistent.data(),
                     resumedAnywhere && !gathered ? spec.persistentBytes
                                                  : spec.paramBytes + spec.bufferBytes,
                     0);
  }
  // Sharded: each rank takes its shards of rank 0's resumed state (and,
  // stage 3, of its parameters), broadcast a bucket at a time.
  if (resumedAnywhere && shardedParams)
    scatterParamImage(spec, comm,
                      resume ? resumed->data() + spec.persistentBytes + gathered : nullptr,
                      persistent.data());
  // (In place in the resumed block, whose floats lie at multiples of 4
  // bytes from its allocation's start.)
  if (resumedAnywhere && gathered)
    scatterShardedState(
        spec, comm,
        resume ? reinterpret_cast<const float *>(resumed->data() + spec.persistentBytes)
               : nullptr,
        persistent.data());
  hyper.lr = this->opts.lr;
  hyper.maxGradNorm = this->opts.maxGradNorm;
  hyper.step = 0;
  args.persistent = persistent.data();
  args.arena = arena.data();
  args.hyper = &hyper;
  args.outputs = outputs.data();
  args.paramGrads = nullptr;
  args.predictions = nullptr;
  args.comm = &comm;
  carried.assign(size_t(std::max(0, spec.numBuckets)), Request());
  args.carried = carried.data();
  args.gradSeed = 1.0f;
  // Before any step (--gradcheck's steps): the seed of step 0, the same in
  // every evaluation of the loss.
  args.rngSeed = stepRngSeed(opts.seed, 0, comm.rank());
  args.trace = nullptr;
  args.device = nullptr;
}

void Session::finishCarried() {
  for (Request &slot : carried)
    if (const Request r = slot) {
      slot = Request();
      comm.wait(r);
    }
}

void Session::loadBatch(const Dataset &ds, const int64_t *idx, int64_t n, uint64_t draw) {
  batch.gather(ds, idx, n, draw);
  batch.bind(args);
}

} // namespace dtc::rt
