//===- ShardWeightUpdate.cpp - Reduce-scatter, update the shard, gather ---===//
//
// Sharded data parallelism as a rewrite of the data-parallel plan (ZeRO's
// stages 1 and 2; XLA's weight-update sharding, Xu et al. 2020): the
// buckets dtc-bucket-allreduce made and dtc-overlap-allreduce scheduled keep
// their gradients, their order and their starts; what each rank does with
// a bucket's sum changes. Instead of all ranks updating every parameter
// with the whole sum, each rank receives its part of the sum
// (reduce-scatter), updates that part of the bucket's parameters with that
// part of their optimizer state (which is all it holds), and the parts
// travel back to every rank (all-gather). The same bytes cross the network
// as an all-reduce; each rank does 1/N of the update and holds 1/N of the
// optimizer state.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Steps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include <limits>
#include <map>
#include <numeric>

namespace dtc {
#define GEN_PASS_DEF_SHARDWEIGHTUPDATE
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {

/// A bucket of the replicated plan: its collective (a start and its wait,
/// or one dtc.all_reduce_bucket), gradients, and the parameters their sums
/// update.
struct Bucket {
  int64_t id;
  Operation *start, *wait; // the same op for dtc.all_reduce_bucket
  SmallVector<Value> grads;
  SmallVector<ApplyGradientOp> updates;
  SmallVector<Attribute> params;
};

/// A parameter of a sharded bucket: the bucket, its offset in it (floats),
/// the bucket's floats and its parameters.
struct Member {
  int64_t bucket = -1, within = 0, count = 0;
  ArrayAttr params;
};

struct ShardWeightUpdatePass
    : public dtc::impl::ShardWeightUpdateBase<ShardWeightUpdatePass> {
  using Base::Base;
  void runOnOperation() override;
  void gatherParameters(func::FuncOp f, const llvm::StringMap<Member> &members,
                        int64_t numBuckets);
};

/// Stage 3 in one step: each read of a sharded parameter becomes a view
/// into its bucket, gathered whole before the bucket's first read in
/// forward and again before its first read in backward (after the step's
/// dtc.grad_seed), `prefetch` gathers ahead: gather i starts once gather i
/// - prefetch has been waited for. A gathered buffer is free after its
/// views' last reads, so that at most prefetch + 1 buckets are whole at
/// once. Backward's gathers are numbered after the buckets (bucket +
/// numBuckets) for the runtime: the same bucket may be gathered for
/// forward and for backward at once.
void ShardWeightUpdatePass::gatherParameters(
    func::FuncOp f, const llvm::StringMap<Member> &members,
    int64_t numBuckets) {
  Block &block = f.front();
  DenseMap<Operation *, int64_t> position;
  int64_t n = 0, backward = std::numeric_limits<int64_t>::max();
  for (Operation &op : block) {
    position[&op] = n++;
    if (isa<GradSeedOp>(op) && backward > n)
      backward = n;
  }
  // The reads of each (bucket, phase), in order of their first read.
  struct Gather {
    int64_t bucket, phase;
    Operation *first = nullptr;
    SmallVector<OpOperand *> reads;
  };
  SmallVector<Gather> gathers;
  std::map<std::pair<int64_t, int64_t>, size_t> index;
  SmallVector<ParamRefOp> refs;
  for (Operation &op : block)
    if (auto ref = dyn_cast<ParamRefOp>(op);
        ref && members.count(ref.getParam()))
      refs.push_back(ref);
  for (ParamRefOp ref : refs)
    for (OpOperand &use : ref->getUses()) {
      // (The user's place in the step's block: a fused body's op counts as
      // its kernel.)
      Operation *user = block.findAncestorOpInBlock(*use.getOwner());
      int64_t phase = position.lookup(user) >= backward;
      const Member &m = members.lookup(ref.getParam());
      auto [it, added] = index.try_emplace({m.bucket, phase}, gathers.size());
      if (added)
        gathers.push_back({m.bucket, phase});
      Gather &g = gathers[it->second];
      if (!g.first || user->isBeforeInBlock(g.first))
        g.first = user;
      g.reads.push_back(&use);
    }
  llvm::stable_sort(gathers, [](const Gather &a, const Gather &b) {
    return a.first->isBeforeInBlock(b.first);
  });
  MLIRContext *ctx = f.getContext();
  SmallVector<GatherParamsWaitOp> waits;
  SmallVector<Operation *> firstStarts; // the gathers started at the start
  for (auto [i, g] : llvm::enumerate(gathers)) {
    const Member &any = members.lookup(
        cast<ParamRefOp>(g.reads.front()->get().getDefiningOp()).getParam());
    auto type = RankedTensorType::get({any.count}, Float32Type::get(ctx));
    int64_t id = g.bucket + g.phase * numBuckets;
    // The start: `prefetch` gathers ahead (the first ones at the step's
    // start), never after its first read.
    OpBuilder b(ctx);
    if (i == 0)
      b.setInsertionPointToStart(&block);
    else if (i < size_t(prefetch)) // (in order of first reads)
      b.setInsertionPointAfter(firstStarts.back());
    else
      b.setInsertionPointAfter(waits[i - prefetch]);
    if (g.first->isBeforeInBlock(&*b.getInsertionPoint()))
      b.setInsertionPoint(g.first);
    Location loc = g.first->getLoc();
    auto start = GatherParamsStartOp::create(b, loc, RequestType::get(ctx),
                                             type, any.params, id);
    if (i < size_t(prefetch))
      firstStarts.push_back(start);
    b.setInsertionPoint(g.first);
    waits.push_back(GatherParamsWaitOp::create(b, loc, type, start.getRequest(),
                                               start.getGathered(), id));
    // One view a parameter, right after the wait.
    llvm::StringMap<Value> views;
    for (OpOperand *read : g.reads) {
      auto ref = cast<ParamRefOp>(read->get().getDefiningOp());
      Value &view = views[ref.getParam()];
      if (!view)
        view = ParamViewOp::create(
            b, ref.getLoc(), ref.getType(), waits.back().getResult(),
            ref.getParamAttr(),
            b.getI64IntegerAttr(members.lookup(ref.getParam()).within));
      read->set(view);
    }
  }
  for (ParamRefOp ref : refs)
    if (ref->use_empty())
      ref.erase();
}

void ShardWeightUpdatePass::runOnOperation() {
  ModuleOp module = getOperation();
  ShardAttr shard = shardOf(module);
  if (!shard || shard.getStage() == ShardStage::None)
    return;
  if (shard.getRanks() < 1) {
    module.emitError("sharding (")
        << stringifyShardStage(shard.getStage())
        << ") plans the shards for a world size: give it with dtc --ranks N "
           "or the recipe's ranks = N";
    return signalPassFailure();
  }
  if (inflight < 1 || prefetch < 1) {
    module.emitError(
        "dtc-shard-weight-update: inflight and prefetch must be >= 1");
    return signalPassFailure();
  }
  const bool shardParams = shard.getStage() == ShardStage::Parameters;
  func::FuncOp step = steps::trainStep(module, *this);
  if (!step)
    return signalPassFailure();
  const bool inPlace = shard.getStage() == ShardStage::Optimizer;
  MLIRContext *ctx = &getContext();

  SmallVector<Bucket> buckets;
  bool failed = false;
  auto addBucket = [&](Operation *start, Operation *wait, int64_t id,
                       ValueRange grads, ValueRange sums) {
    Bucket b{id, start, wait, SmallVector<Value>(grads), {}, {}};
    for (Value sum : sums) {
      auto update = sum.hasOneUse()
                        ? dyn_cast<ApplyGradientOp>(*sum.getUsers().begin())
                        : ApplyGradientOp();
      if (!update || update.getGrad() != sum || update.getScale()) {
        wait->emitError("dtc-shard-weight-update: each summed gradient must "
                        "feed one parameter update (run it before "
                        "dtc-clip-grad-norm and dtc-group-updates)");
        failed = true;
        return;
      }
      b.updates.push_back(update);
      b.params.push_back(update.getParamAttr());
    }
    buckets.push_back(std::move(b));
  };
  for (Operation &op : step.front()) {
    if (auto start = dyn_cast<AllReduceStartOp>(op)) {
      AllReduceWaitOp wait;
      for (Operation *user : start.getRequest().getUsers())
        wait = dyn_cast<AllReduceWaitOp>(user);
      if (!wait) {
        start.emitError("dtc-shard-weight-update: an all-reduce without its "
                        "wait");
        return signalPassFailure();
      }
      addBucket(start, wait, start.getBucket(), start.getGrads(),
                wait.getResults());
    } else if (auto bucket = dyn_cast<AllReduceBucketOp>(op)) {
      addBucket(bucket, bucket, bucket.getBucket(), bucket.getGrads(),
                bucket.getResults());
    } else if (isa<AllReduceOp>(op)) {
      op.emitError("dtc-shard-weight-update shards buckets: run "
                   "dtc-bucket-allreduce first");
      return signalPassFailure();
    }
  }
  if (failed)
    return signalPassFailure();
  llvm::DenseSet<Operation *> bucketed;
  for (Bucket &b : buckets)
    for (ApplyGradientOp u : b.updates)
      bucketed.insert(u);
  for (ApplyGradientOp u : step.getOps<ApplyGradientOp>())
    if (!bucketed.contains(u)) {
      u.emitError("dtc-shard-weight-update: the gradient of ")
          << u.getParamAttr() << " is in no bucket";
      return signalPassFailure();
    }
  llvm::stable_sort(
      buckets, [](const Bucket &a, const Bucket &b) { return a.id < b.id; });

  // Each bucket's first gradient, where stage 2 must have freed the bucket
  // `inflight` places before.
  auto firstMade = [](const Bucket &b) {
    Operation *first = nullptr;
    for (Value g : b.grads) {
      Operation *def = g.getDefiningOp();
      if (def && (!first || def->isBeforeInBlock(first)))
        first = def;
    }
    return first;
  };
  Operation *ret = step.front().getTerminator();
  SmallVector<ReduceScatterWaitOp> waits;
  for (auto [i, b] : llvm::enumerate(buckets)) {
    BucketLayout layout =
        bucketLayout(ValueRange(b.grads).getTypes(), shard.getRanks());
    auto shardType =
        RankedTensorType::get({layout.shard}, Float32Type::get(ctx));
    OpBuilder builder(b.start);
    Location loc = b.start->getLoc();
    auto start = ReduceScatterStartOp::create(
        builder, loc, RequestType::get(ctx), shardType, b.grads, b.id, inPlace);
    // The wait: where the all-reduce waited (stage 1, and without overlap
    // right after the start); stage 2 frees the bucket before bucket
    // i + inflight's first gradient.
    Operation *waitBefore = b.wait == b.start ? b.start->getNextNode() : b.wait;
    if (!inPlace && b.wait != b.start && i + inflight < buckets.size())
      if (Operation *next = firstMade(buckets[i + inflight]);
          next && start->isBeforeInBlock(next))
        waitBefore = next;
    builder.setInsertionPoint(waitBefore);
    waits.push_back(
        ReduceScatterWaitOp::create(builder, loc, shardType, start.getRequest(),
                                    start.getShard(), b.grads, b.id));
  }
  // The updates after the last wait, each followed by the start of its
  // all-gather, in the order of the buckets' first reads in forward, which
  // the next step waits for in that order. (Stage 3: the shards are the
  // parameters; the steps gather them where they use them.)
  DenseMap<Attribute, int64_t> bucketOf;
  for (auto [i, b] : llvm::enumerate(buckets))
    for (Attribute p : b.params)
      bucketOf[p] = int64_t(i);
  // Each bucket's first reader in f's block (its own update, at the
  // latest, where f has one).
  auto firstReads = [&](func::FuncOp f) {
    SmallVector<Operation *> first(buckets.size(), nullptr);
    Block &block = f.front();
    auto note = [&](int64_t i, Operation *op) {
      op = block.findAncestorOpInBlock(*op);
      if (op && (!first[i] || op->isBeforeInBlock(first[i])))
        first[i] = op;
    };
    f.walk([&](Operation *op) {
      if (auto ref = dyn_cast<ParamRefOp>(op)) {
        auto it = bucketOf.find(ref.getParamAttr());
        if (it != bucketOf.end())
          for (Operation *user : ref->getUsers())
            note(it->second, user);
      } else if (auto update = dyn_cast<ShardUpdateOp>(op)) {
        for (auto [i, b] : llvm::enumerate(buckets))
          if (b.id == int64_t(update.getBucket()))
            note(int64_t(i), op);
      }
    });
    return first;
  };
  SmallVector<size_t> order(buckets.size());
  std::iota(order.begin(), order.end(), 0);
  {
    SmallVector<Operation *> first = firstReads(step);
    llvm::stable_sort(order, [&](size_t a, size_t b) {
      if (!first[a] || !first[b])
        return first[a] && !first[b];
      return first[a]->isBeforeInBlock(first[b]);
    });
  }
  const bool carry = this->carry && !shardParams;
  OpBuilder builder(ret);
  SmallVector<std::pair<int64_t, AllGatherStartOp>> gathers;
  for (size_t i : order) {
    Bucket &b = buckets[i];
    Location loc = b.updates.front().getLoc();
    ArrayAttr params = builder.getArrayAttr(b.params);
    ShardUpdateOp::create(builder, loc, waits[i].getResult(), params, b.id,
                          Value());
    if (!shardParams)
      gathers.push_back(
          {b.id, AllGatherStartOp::create(builder, loc, RequestType::get(ctx),
                                          params, b.id, carry)});
  }
  if (!carry)
    for (auto [id, gather] : gathers)
      AllGatherWaitOp::create(builder, gather.getLoc(), gather.getRequest(),
                              id);
  // Carried: each function waits for a bucket's gather before its first
  // read of the bucket's parameters (or its update of them).
  if (carry)
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      SmallVector<Operation *> first = firstReads(f);
      for (auto [i, at] : llvm::enumerate(first))
        if (at) {
          OpBuilder b(at);
          AllGatherWaitOp::create(b, at->getLoc(), Value(), buckets[i].id);
        }
    }
  // Stage 3: where each bucket's parameters live whole, in every step.
  if (shardParams) {
    llvm::StringMap<Member> members;
    for (Bucket &b : buckets) {
      BucketLayout layout =
          bucketLayout(ValueRange(b.grads).getTypes(), shard.getRanks());
      for (auto [param, within] : llvm::zip(b.params, layout.within))
        members[cast<FlatSymbolRefAttr>(param).getValue()] = {
            b.id, within, layout.count, builder.getArrayAttr(b.params)};
    }
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal())
        gatherParameters(f, members, int64_t(buckets.size()));
  }
  for (Bucket &b : buckets) {
    for (ApplyGradientOp u : b.updates)
      u.erase();
    if (b.wait != b.start)
      b.wait->erase();
    b.start->erase();
  }
}

} // namespace
