//===- BucketAllReduce.cpp - Fuses gradient all-reduces into buckets
//--------===//
//
// One of the three data-parallel passes (insert, bucket, overlap). What
// PyTorch DDP decides at run time with autograd hooks and Horovod with its
// fusion buffer, dtc decides at compile time, identically on every rank, and
// shows in the IR.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Steps.h"

#include "mlir/IR/Builders.h"

namespace dtc {
#define GEN_PASS_DEF_BUCKETALLREDUCE
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {

/// Stage 2's buckets: at most this fraction of the gradients each.
constexpr int64_t kShardedBuckets = 16;

int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() * (t.getElementType().getIntOrFloatBitWidth() / 8);
}

struct BucketAllReducePass
    : public dtc::impl::BucketAllReduceBase<BucketAllReducePass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp step = steps::trainStep(getOperation(), *this);
    if (!step)
      return signalPassFailure();
    if (bucketBytes < 0 || firstBucketBytes < 0) {
      step.emitError("bucket byte caps must be >= 0");
      return signalPassFailure();
    }
    // Backward order: the order in which the gradients are produced.
    Block &block = step.front();
    DenseMap<Operation *, int64_t> position;
    int64_t n = 0;
    for (Operation &op : block)
      position[&op] = n++;
    SmallVector<AllReduceOp> reduces(step.getOps<AllReduceOp>());
    auto producedAt = [&](AllReduceOp r) {
      return position.lookup(r.getGrad().getDefiningOp());
    };
    llvm::stable_sort(reduces, [&](AllReduceOp a, AllReduceOp b) {
      return producedAt(a) < producedAt(b);
    });

    // Stage 2 of sharding frees each bucket once it is reduce-scattered
    // (dtc-shard-weight-update): its gradients take the memory of the few
    // buckets in flight, so buckets are at most 1/kShardedBuckets of them.
    int64_t cap = bucketBytes, firstCap = firstBucketBytes;
    if (ShardAttr shard = shardOf(getOperation());
        shard && shard.getStage() >= ShardStage::Gradients) {
      int64_t total = 0;
      for (AllReduceOp r : reduces)
        total += bytesOf(r.getGrad());
      cap = std::min(cap, std::max<int64_t>(1, total / kShardedBuckets));
      firstCap = std::min(firstCap, cap);
    }
    // The block instance of the parameter a gradient updates: its name's
    // first part ("h3" of "h3.attn.c_attn.weight").
    auto blockOf = [](AllReduceOp r) -> StringRef {
      for (Operation *u : r->getUsers())
        if (auto update = dyn_cast<ApplyGradientOp>(u))
          return update.getParam().split('.').first;
      return {};
    };
    SmallVector<SmallVector<AllReduceOp>> buckets;
    int64_t bytes = 0;
    StringRef instance; // the bucket's block instance, by block
    for (AllReduceOp r : reduces) {
      StringRef b = byBlock ? blockOf(r) : StringRef();
      // (By block: a bucket is a block instance's parameters, whatever
      // their bytes.)
      if (buckets.empty() || b != instance ||
          (!byBlock && bytes >= (buckets.size() == 1 ? firstCap : cap))) {
        instance = b;
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(r);
      bytes += bytesOf(r.getGrad());
    }

    // All buckets, in order, before the first reader of any averaged
    // gradient (the optimizer updates, after backward).
    Operation *firstUse = nullptr;
    for (AllReduceOp r : reduces)
      for (Operation *u : r->getUsers())
        if (!firstUse || u->isBeforeInBlock(firstUse))
          firstUse = u;
    OpBuilder b(firstUse ? firstUse : block.getTerminator());
    for (auto [id, members] : llvm::enumerate(buckets)) {
      SmallVector<Value> grads;
      SmallVector<Type> types;
      for (AllReduceOp r : members) {
        grads.push_back(r.getGrad());
        types.push_back(r.getType());
      }
      auto bucket = AllReduceBucketOp::create(b, members.front().getLoc(),
                                              types, grads, id);
      for (auto [r, result] : llvm::zip(members, bucket.getResults())) {
        r.getResult().replaceAllUsesWith(result);
        r.erase();
      }
    }
  }
};

} // namespace
