//===- PlanMemory.cpp - One arena per step, reused by liveness ------------===//
#include "passes/Passes.h"

#include "dialects/dtc/ShapeInference.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include <limits>
#include <map>

namespace dtc {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

OptimizerAttr dtc::optimizerOf(ModuleOp module) {
  return module->getContext()
      ->getLoadedDialect<DtcDialect>()
      ->getOptimizerAttrHelper()
      .getAttr(module);
}

ShardAttr dtc::shardOf(ModuleOp module) {
  ShardAttr shard = module->getContext()
                        ->getLoadedDialect<DtcDialect>()
                        ->getShardAttrHelper()
                        .getAttr(module);
  return shard && shard.getStage() != ShardStage::None ? shard : ShardAttr();
}

int dtc::optimizerStateBuffers(ModuleOp module) {
  OptimizerAttr opt = optimizerOf(module);
  return opt ? opt.numStateBuffers() : 0;
}

namespace {
struct PlanMemoryPass : public dtc::impl::PlanMemoryBase<PlanMemoryPass> {
  using Base::Base;
  void runOnOperation() override;
};

int64_t alignTo(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/// Best-fit placement of live ranges in one growing region.
class Region {
public:
  explicit Region(int64_t alignment) : alignment(alignment) {}

  int64_t allocate(int64_t size) {
    size = alignTo(std::max<int64_t>(size, 1), alignment);
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it)
      if (it->second >= size &&
          (best == free.end() || it->second < best->second))
        best = it;
    if (best == free.end()) {
      // Grow, reusing a free range that touches the top.
      int64_t offset = top;
      if (!free.empty()) {
        auto lastFree = std::prev(free.end());
        if (lastFree->first + lastFree->second == top) {
          offset = lastFree->first;
          free.erase(lastFree);
        }
      }
      top = offset + size;
      peak = std::max(peak, top);
      return offset;
    }
    int64_t offset = best->first, left = best->second - size;
    free.erase(best);
    if (left)
      free[offset + size] = left;
    return offset;
  }

  void release(int64_t offset, int64_t size) {
    size = alignTo(std::max<int64_t>(size, 1), alignment);
    auto [it, ok] = free.emplace(offset, size);
    (void)ok;
    // Coalesce with neighbours.
    auto next = std::next(it);
    if (next != free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free.erase(it);
        it = prev;
      }
    }
    if (it->first + it->second == top) {
      top = it->first;
      free.erase(it);
    }
  }

  int64_t peakBytes() const { return peak; }

private:
  int64_t alignment;
  int64_t top = 0, peak = 0;
  std::map<int64_t, int64_t> free; // offset -> size
};

/// The live ranges of one region's buffers, placed again once all are
/// known (greedy by size: the largest first, each at the lowest offset
/// clear of the placed buffers it is live with; Pisarchyk and Lee,
/// "Efficient Memory Management for Deep Neural Net Inference", 2020),
/// which the program-order best fit of Region can fragment.
struct LiveRanges {
  struct Range {
    int64_t start, end, bytes, offset = 0;
  };
  std::vector<Range> ranges;

  unsigned add(int64_t start, int64_t bytes) {
    ranges.push_back({start, std::numeric_limits<int64_t>::max(), bytes});
    return unsigned(ranges.size() - 1);
  }
  /// Places every range; returns the peak.
  int64_t place(int64_t alignment) {
    auto order = llvm::to_vector(llvm::seq<unsigned>(0, ranges.size()));
    llvm::stable_sort(order, [&](unsigned a, unsigned b) {
      return ranges[a].bytes > ranges[b].bytes;
    });
    SmallVector<unsigned> placed;
    int64_t peak = 0;
    for (unsigned i : order) {
      Range &r = ranges[i];
      r.bytes = alignTo(std::max<int64_t>(r.bytes, 1), alignment);
      SmallVector<std::pair<int64_t, int64_t>> taken; // [offset, end)
      for (unsigned j : placed)
        if (ranges[j].start <= r.end && r.start <= ranges[j].end)
          taken.push_back(
              {ranges[j].offset, ranges[j].offset + ranges[j].bytes});
      llvm::sort(taken);
      int64_t at = 0;
      for (auto [from, to] : taken) {
        if (from - at >= r.bytes)
          break;
        at = std::max(at, to);
      }
      r.offset = at;
      peak = std::max(peak, at + r.bytes);
      placed.push_back(i);
    }
    return peak;
  }
};

/// A tensor's bytes: per sample when batched, else in total.
int64_t bytesOf(Type t) {
  auto rt = cast<RankedTensorType>(t);
  return shape::numElementsPerBatch(rt) *
         (rt.getElementType().getIntOrFloatBitWidth() / 8);
}

/// The operand whose buffer result `v` lives in (TiedOpInterface: views and
/// in-place collectives), or null.
Value aliasedOperand(Value v) {
  auto r = dyn_cast<OpResult>(v);
  auto tied = r ? dyn_cast<TiedOpInterface>(r.getOwner()) : TiedOpInterface();
  return tied ? tied.getTiedOperand(r.getResultNumber()) : Value();
}

/// Values that need no arena storage: parameters, inputs, aliases, requests.
bool isExternalOrAlias(Value v) {
  return !isa<RankedTensorType>(v.getType()) || isa<BlockArgument>(v) ||
         v.getDefiningOp<ParamRefOp>() || aliasedOperand(v);
}

/// The value whose storage `v` uses (through aliases).
Value storageOf(Value v) {
  while (Value a = aliasedOperand(v))
    v = a;
  return v;
}

/// A gradient bucket: its members are placed contiguously, in order, in one
/// block of the fixed region, so one collective covers them all.
struct Bucket {
  Operation *op;
  int64_t bytes = 0;
  int64_t offset = -1; // once allocated
  int live = 0;        // members not yet dead
  int64_t padded = 0;  // a sharded bucket's bytes with its padding
};

constexpr int64_t kBucketMemberAlign = 16;
} // namespace

BucketLayout dtc::bucketLayout(TypeRange grads, int64_t ranks) {
  BucketLayout layout;
  int64_t bytes = 0;
  for (Type t : grads) {
    layout.within.push_back(bytes / 4);
    bytes += alignTo(bytesOf(t), kBucketMemberAlign);
  }
  layout.count = bytes / 4;
  if (ranks > 0) {
    const int64_t perShard = kBucketMemberAlign / 4;
    layout.shard = alignTo((layout.count + ranks - 1) / ranks, perShard);
    layout.count = layout.shard * ranks;
  }
  return layout;
}

namespace {

struct Plan {
  int64_t perSample = 0, fixed = 0, naivePerSample = 0, naiveFixed = 0;
};

std::optional<Plan> planFunction(func::FuncOp func, int64_t alignment) {
  Block &block = func.front();
  DtcDialect *dialect = func->getContext()->getLoadedDialect<DtcDialect>();
  DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : block)
    index[&op] = n++;
  // Last use of each storage value (returned values live to the end).
  DenseMap<Value, int64_t> lastUse;
  for (Operation &op : block)
    for (Value v : op.getOperands()) {
      Value s = storageOf(v);
      int64_t at = isa<func::ReturnOp>(op) ? n : index[&op];
      lastUse[s] = std::max(lastUse.lookup(s), at);
    }
  // Ends of live ranges, by op index.
  std::map<int64_t, SmallVector<Value>> dying;
  for (auto [v, at] : lastUse)
    dying[at].push_back(v);

  // Buckets of gradients that collectives reduce in place.
  SmallVector<Bucket> buckets;
  DenseMap<Value, std::pair<unsigned, int64_t>>
      bucketSlot; // member -> (bucket, offset in it)
  ShardAttr shard = shardOf(func->getParentOfType<ModuleOp>());
  for (Operation &op : block) {
    ValueRange grads;
    if (auto r = dyn_cast<AllReduceOp>(op))
      grads = r->getOperands();
    else if (auto bk = dyn_cast<AllReduceBucketOp>(op))
      grads = bk.getGrads();
    else if (auto st = dyn_cast<AllReduceStartOp>(op))
      grads = st.getGrads();
    else if (auto rs = dyn_cast<ReduceScatterStartOp>(op))
      grads = rs.getGrads();
    else
      continue;
    Bucket bucket{&op};
    // A reduce-scatter's bucket is padded to its shards (bucketLayout).
    if (auto rs = dyn_cast<ReduceScatterStartOp>(op)) {
      BucketLayout layout =
          bucketLayout(grads.getTypes(), shard ? shard.getRanks() : 0);
      if (!shard || layout.shard != rs.getShard().getType().getNumElements()) {
        op.emitError("the shard does not fit the bucket's layout for the "
                     "module's dtc.shard");
        return std::nullopt;
      }
      bucket.padded = layout.count * 4;
    }
    for (Value g : grads) {
      Value s = storageOf(g);
      auto t = cast<RankedTensorType>(s.getType());
      if (isExternalOrAlias(s) || shape::isBatched(t) || bucketSlot.count(s)) {
        op.emitError("gradient operands of collectives need buffers of their "
                     "own with a fixed size");
        return std::nullopt;
      }
      bucketSlot[s] = {buckets.size(), bucket.bytes};
      bucket.bytes += alignTo(bytesOf(t), kBucketMemberAlign);
      ++bucket.live;
    }
    bucket.bytes = std::max(bucket.bytes, bucket.padded);
    buckets.push_back(bucket);
  }

  int64_t batchedAlign = std::max<int64_t>(alignment / 4, 4);
  Region batched(batchedAlign), fixedRegion(alignment);
  Plan plan;
  DenseMap<Value, int64_t> offsetOf;
  // The batched buffers' live ranges (each storage's, in-place results
  // continuing their input's), and the results placed in each.
  LiveRanges batchedRanges;
  DenseMap<Value, unsigned> rangeOf;
  SmallVector<std::tuple<Operation *, unsigned, unsigned>> batchedResults;
  // Storage whose buffer a fused kernel's result took over (in place): not
  // released where it dies, the result releases it.
  llvm::SmallPtrSet<void *, 16> handedOver;
  Builder b(func.getContext());
  for (Operation &op : block) {
    SmallVector<int64_t> offsets;
    bool needsStorage = false;
    // An elementwise kernel writes each result over an input of its type
    // whose storage dies here (inputs read at the element's own index,
    // before it is written): the result takes that buffer, so that the
    // kernel writes memory it has just read, not a cold buffer, and the
    // arena shrinks. Not over an input whose storage another input shares
    // (read elsewhere in the row), nor into a gradient bucket.
    SmallVector<int64_t> inPlace;
    if (auto fused = dyn_cast<FusedOp>(op)) {
      inPlace.assign(op.getNumResults(), -1);
      DenseMap<Value, int> readers; // storage -> inputs reading it
      for (Value in : fused.getInputs())
        ++readers[storageOf(in)];
      for (OpResult r : op.getResults()) {
        if (isExternalOrAlias(r) || bucketSlot.count(r))
          continue;
        for (auto [i, in] : llvm::enumerate(fused.getInputs())) {
          Value s = storageOf(in);
          if (in.getType() != r.getType() || !offsetOf.count(s) ||
              bucketSlot.count(s) ||
              handedOver.contains(s.getAsOpaquePointer()) || readers[s] != 1 ||
              lastUse.lookup(s) != index[&op] ||
              bytesOf(s.getType()) != bytesOf(r.getType()) ||
              shape::isBatched(cast<RankedTensorType>(s.getType())) !=
                  shape::isBatched(cast<RankedTensorType>(r.getType())))
            continue;
          inPlace[r.getResultNumber()] = int64_t(i);
          handedOver.insert(s.getAsOpaquePointer());
          break;
        }
      }
      if (llvm::any_of(inPlace, [](int64_t i) { return i >= 0; }))
        dialect->getInPlaceAttrHelper().setAttr(
            &op, b.getDenseI64ArrayAttr(inPlace));
    }
    for (Value r : op.getResults()) {
      if (isExternalOrAlias(r)) {
        offsets.push_back(-1);
        continue;
      }
      needsStorage = true;
      auto t = cast<RankedTensorType>(r.getType());
      int64_t bytes = bytesOf(t);
      bool isBatched = shape::isBatched(t);
      int64_t off;
      if (auto ri = cast<OpResult>(r).getResultNumber();
          !inPlace.empty() && inPlace[ri] >= 0) {
        Value taken = storageOf(op.getOperand(unsigned(inPlace[ri])));
        off = offsetOf[taken];
        if (isBatched)
          rangeOf[r] = rangeOf.lookup(taken);
        (isBatched ? plan.naivePerSample : plan.naiveFixed) += alignTo(
            bytes, isBatched ? std::max<int64_t>(alignment / 4, 4) : alignment);
      } else if (auto slot = bucketSlot.find(r); slot != bucketSlot.end()) {
        Bucket &bucket = buckets[slot->second.first];
        if (bucket.offset < 0) {
          bucket.offset = fixedRegion.allocate(bucket.bytes);
          plan.naiveFixed += alignTo(bucket.bytes, alignment);
        }
        off = bucket.offset + slot->second.second;
      } else {
        off = isBatched ? batched.allocate(bytes) : fixedRegion.allocate(bytes);
        if (isBatched)
          rangeOf[r] = batchedRanges.add(index[&op], bytes);
        (isBatched ? plan.naivePerSample : plan.naiveFixed) += alignTo(
            bytes, isBatched ? std::max<int64_t>(alignment / 4, 4) : alignment);
      }
      offsetOf[r] = off;
      if (auto range = rangeOf.find(r); range != rangeOf.end())
        batchedResults.push_back(
            {&op, cast<OpResult>(r).getResultNumber(), range->second});
      offsets.push_back(off);
      // A result nobody uses dies at once.
      if (!lastUse.count(r))
        dying[index[&op]].push_back(r);
    }
    if (needsStorage)
      dialect->getOffsetsAttrHelper().setAttr(&op,
                                              b.getDenseI64ArrayAttr(offsets));
    // Scratch memory: live while the op runs, beside its operands and
    // results.
    if (auto scratch = dyn_cast<ScratchOpInterface>(op)) {
      if (int64_t bytes = scratch.getScratchBytes(); bytes > 0) {
        int64_t off = fixedRegion.allocate(bytes);
        plan.naiveFixed += alignTo(bytes, alignment);
        dialect->getScratchAttrHelper().setAttr(&op, b.getI64IntegerAttr(off));
        fixedRegion.release(off, bytes);
      }
    }
    auto it = dying.find(index[&op]);
    if (it == dying.end())
      continue;
    for (Value v : it->second) {
      auto off = offsetOf.find(v);
      if (off == offsetOf.end() || handedOver.contains(v.getAsOpaquePointer()))
        continue; // external storage, or a result's now
      if (auto slot = bucketSlot.find(v); slot != bucketSlot.end()) {
        Bucket &bucket = buckets[slot->second.first];
        if (--bucket.live == 0)
          fixedRegion.release(bucket.offset, bucket.bytes);
        continue;
      }
      auto t = cast<RankedTensorType>(v.getType());
      (shape::isBatched(t) ? batched : fixedRegion)
          .release(off->second, bytesOf(t));
      if (auto range = rangeOf.find(v); range != rangeOf.end())
        batchedRanges.ranges[range->second].end = index[&op];
    }
  }
  // The batched buffers placed again knowing every live range, where that
  // needs less than the program-order placement.
  plan.perSample = batched.peakBytes();
  if (int64_t offline = batchedRanges.place(batchedAlign);
      offline < plan.perSample) {
    plan.perSample = offline;
    for (auto [op, result, range] : batchedResults) {
      SmallVector<int64_t> offsets(
          dialect->getOffsetsAttrHelper().getAttr(op).asArrayRef());
      offsets[result] = batchedRanges.ranges[range].offset;
      dialect->getOffsetsAttrHelper().setAttr(op,
                                              b.getDenseI64ArrayAttr(offsets));
    }
  }
  MLIRContext *ctx = func.getContext();
  for (Bucket &bucket : buckets) {
    std::optional<int64_t> shardFloats;
    if (auto rs = dyn_cast<ReduceScatterStartOp>(bucket.op))
      shardFloats = rs.getShard().getType().getNumElements();
    dialect->getBucketPlanAttrHelper().setAttr(
        bucket.op,
        BucketPlanAttr::get(ctx, bucket.offset, bucket.bytes / 4, std::nullopt,
                            shardFloats, std::nullopt, std::nullopt));
  }
  plan.fixed = fixedRegion.peakBytes();
  dialect->getArenaAttrHelper().setAttr(
      func, ArenaAttr::get(ctx, plan.perSample, plan.fixed, plan.naivePerSample,
                           plan.naiveFixed));
  return plan;
}
} // namespace

void PlanMemoryPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (alignment <= 0 || (alignment & (alignment - 1)) || alignment % 16) {
    module.emitError("alignment must be a power of two >= 16");
    return signalPassFailure();
  }
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    if (!func.getBody().hasOneBlock()) {
      func.emitError("dtc-plan-memory needs single-block functions");
      return signalPassFailure();
    }
    std::optional<Plan> planned = planFunction(func, alignment);
    if (!planned)
      return signalPassFailure();
    Plan &plan = *planned;
    if (report)
      func.emitRemark() << "arena " << plan.perSample << " B/sample + "
                        << plan.fixed
                        << " B (without reuse: " << plan.naivePerSample
                        << " B/sample + " << plan.naiveFixed << " B)";
  }

  // Sharded: every bucket's parameters laid out like it.
  SmallVector<MirroredBucket> sharded;
  if (shardOf(module)) {
    llvm::StringSet<> seen;
    bool failed = false;
    module.walk([&](ReduceScatterStartOp rs) {
      if (std::optional<MirroredBucket> bucket = mirroredBucket(rs, seen))
        sharded.push_back(std::move(*bucket));
      else
        failed = true;
    });
    if (failed ||
        seen.size() != size_t(llvm::range_size(module.getOps<ParamOp>()))) {
      module.emitError("sharded training needs every parameter's gradient in "
                       "a reduce-scattered bucket (dtc-shard-weight-update)");
      return signalPassFailure();
    }
  }
  layoutPersistent(module, alignment, {}, sharded);
}

std::optional<MirroredBucket> dtc::mirroredBucket(Operation *op,
                                                  llvm::StringSet<> &seen) {
  DtcDialect *dialect = op->getContext()->getLoadedDialect<DtcDialect>();
  BucketPlanAttr plan = dialect->getBucketPlanAttrHelper().getAttr(op);
  if (!plan)
    return std::nullopt;
  MirroredBucket bucket{op, plan.getCount() * 4, {}};
  for (auto [grad, param] : llvm::zip(op->getOperands(), updatedParams(op))) {
    auto def = grad.getDefiningOp();
    auto offsets = def ? dialect->getOffsetsAttrHelper().getAttr(def) : nullptr;
    if (!offsets || param.empty())
      return std::nullopt;
    int64_t at =
        offsets[cast<OpResult>(grad).getResultNumber()] - plan.getOffset();
    // Each parameter once, each gradient inside its bucket (hand-written
    // IR may break either).
    if (!seen.insert(param).second || at < 0 ||
        at + cast<RankedTensorType>(grad.getType()).getNumElements() * 4 >
            bucket.bytes)
      return std::nullopt;
    bucket.members.push_back({param, at});
  }
  return bucket;
}

void dtc::layoutPersistent(ModuleOp module, int64_t alignment,
                           ArrayRef<MirroredBucket> momentum,
                           ArrayRef<MirroredBucket> sharded) {
  MLIRContext *ctx = module.getContext();
  DtcDialect *dialect = ctx->getLoadedDialect<DtcDialect>();
  // Parameters first: each sharded bucket's laid out like it (one
  // all-gather fills them), then the others in order.
  int64_t offset = 0;
  SmallVector<ParamOp> params(module.getOps<ParamOp>());
  llvm::StringMap<int64_t> paramOffset;
  SmallVector<int64_t> bucketParams;
  // (Stage 3: only this rank's shard of them; the steps gather the rest,
  // and the parameters have no place of their own.)
  ShardAttr shard = shardOf(module);
  const bool shardParams = shard && shard.getStage() == ShardStage::Parameters;
  llvm::StringSet<> gathered;
  for (const MirroredBucket &bucket : sharded) {
    bucketParams.push_back(offset);
    BucketPlanAttr plan = dialect->getBucketPlanAttrHelper().getAttr(bucket.op);
    for (const auto &[param, within] : bucket.members) {
      if (shardParams)
        gathered.insert(param);
      else
        paramOffset[param] = offset + within;
    }
    offset = alignTo(
        offset + (shardParams ? plan.getShard().value_or(0) * 4 : bucket.bytes),
        alignment);
  }
  for (ParamOp p : params) {
    if (paramOffset.count(p.getSymName()) || gathered.contains(p.getSymName()))
      continue;
    paramOffset[p.getSymName()] = offset;
    offset = alignTo(offset + bytesOf(p.getType()), alignment);
  }
  const int64_t paramBytes = offset;
  // Then the buffers (model state the optimizer does not touch), so that
  // parameters and buffers, what rank 0 broadcasts at the start, are one
  // range.
  for (BufferOp buf : module.getOps<BufferOp>()) {
    dialect->getPlacementAttrHelper().setAttr(
        buf, PlacementAttr::get(ctx, offset, std::nullopt));
    offset = alignTo(offset + bytesOf(buf.getType()), alignment);
  }
  const int64_t bufferBytes = offset - paramBytes;
  int states = optimizerStateBuffers(module);
  // Then the optimizer state: each sharded bucket's shard of it, the
  // momentum regions that mirror buckets, then each other parameter's state
  // buffers.
  llvm::StringMap<int64_t> stateOffset;
  for (auto [bucket, at] : llvm::zip(sharded, bucketParams)) {
    BucketPlanAttr plan = dialect->getBucketPlanAttrHelper().getAttr(bucket.op);
    dialect->getBucketPlanAttrHelper().setAttr(
        bucket.op,
        BucketPlanAttr::get(ctx, plan.getOffset(), plan.getCount(),
                            std::nullopt, plan.getShard(), at, offset));
    for (const auto &member : bucket.members)
      stateOffset[member.first] = -1; // in the shard
    offset =
        alignTo(offset + states * plan.getShard().value_or(0) * 4, alignment);
  }
  for (const MirroredBucket &bucket : momentum) {
    BucketPlanAttr plan = dialect->getBucketPlanAttrHelper().getAttr(bucket.op);
    dialect->getBucketPlanAttrHelper().setAttr(
        bucket.op,
        BucketPlanAttr::get(ctx, plan.getOffset(), plan.getCount(), offset,
                            std::nullopt, std::nullopt, std::nullopt));
    for (const auto &[param, within] : bucket.members)
      stateOffset[param] = offset + within;
    offset = alignTo(offset + bucket.bytes, alignment);
  }
  for (ParamOp p : params) {
    if (gathered.contains(p.getSymName()))
      continue;
    std::optional<int64_t> state;
    if (auto it = stateOffset.find(p.getSymName()); it != stateOffset.end()) {
      if (it->second >= 0)
        state = it->second;
    } else {
      state = offset;
      offset = alignTo(offset + states * bytesOf(p.getType()), alignment);
    }
    dialect->getPlacementAttrHelper().setAttr(
        p, PlacementAttr::get(ctx, paramOffset[p.getSymName()], state));
  }
  // Last, with gradient accumulation, each parameter's accumulator (zero
  // at every optimizer step's end), where its ops add to and take from it.
  llvm::StringMap<int64_t> accumulator;
  auto placeAccumulator = [&](Operation *op, StringRef param) {
    auto [it, added] = accumulator.try_emplace(param, offset);
    if (added)
      offset =
          alignTo(offset + bytesOf(op->getOperand(0).getType()), alignment);
    dialect->getPlacementAttrHelper().setAttr(
        op, PlacementAttr::get(ctx, it->second, std::nullopt));
  };
  for (ParamOp p : params)
    module.walk([&](Operation *op) {
      if (auto add = dyn_cast<AccumulateGradientOp>(op);
          add && add.getParam() == p.getSymName())
        placeAccumulator(op, add.getParam());
      else if (auto take = dyn_cast<TakeAccumulatedOp>(op);
               take && take.getParam() == p.getSymName())
        placeAccumulator(op, take.getParam());
    });
  dialect->getPersistentAttrHelper().setAttr(
      module, PersistentAttr::get(ctx, paramBytes, bufferBytes, offset));
}
