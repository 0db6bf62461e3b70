//===- DataParallel.cpp - Gradient all-reduce: insert, bucket, overlap ----===//
//
// The three data-parallel passes. What PyTorch DDP decides at run time with
// autograd hooks and Horovod with its fusion buffer, dtc decides here, at
// compile time, identically on every rank, and shows in the IR.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace dtc {
#define GEN_PASS_DEF_INSERTGRADALLREDUCE
#define GEN_PASS_DEF_BUCKETALLREDUCE
#define GEN_PASS_DEF_OVERLAPALLREDUCE
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {

func::FuncOp trainStep(ModuleOp module, Pass &pass) {
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    module.emitError() << pass.getArgument()
                       << " needs a func.func @train_step (run dtc-autodiff "
                          "first)";
  return step;
}

int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() * (t.getElementType().getIntOrFloatBitWidth() / 8);
}

//===----------------------------------------------------------------------===//
// dtc-insert-grad-allreduce
//===----------------------------------------------------------------------===//

struct InsertGradAllReducePass
    : public dtc::impl::InsertGradAllReduceBase<InsertGradAllReducePass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp step = trainStep(getOperation(), *this);
    if (!step)
      return signalPassFailure();
    SmallVector<ApplyGradientOp> updates(step.getOps<ApplyGradientOp>());
    for (ApplyGradientOp update : updates) {
      OpBuilder b(update);
      Value g = update.getGrad();
      // In place needs a buffer of its own: not an input, a parameter, an
      // alias, nor a value someone else reads.
      // The copy goes right after the definition: before anything (such as
      // another parameter's update) can change what it copies.
      Operation *def = g.getDefiningOp();
      if (!g.hasOneUse() || !def ||
          isa<ParamRefOp, ReshapeOp, AllReduceOp>(def)) {
        OpBuilder atDef(update);
        atDef.setInsertionPointAfterValue(g);
        g = CopyOp::create(atDef, update.getLoc(), g.getType(), g);
      }
      auto reduced = AllReduceOp::create(b, update.getLoc(), g.getType(), g);
      update.getGradMutable().assign(reduced);
    }
  }
};

//===----------------------------------------------------------------------===//
// dtc-bucket-allreduce
//===----------------------------------------------------------------------===//

struct BucketAllReducePass
    : public dtc::impl::BucketAllReduceBase<BucketAllReducePass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp step = trainStep(getOperation(), *this);
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

    SmallVector<SmallVector<AllReduceOp>> buckets;
    int64_t bytes = 0;
    for (AllReduceOp r : reduces) {
      if (buckets.empty() || bytes >= (buckets.size() == 1 ? firstBucketBytes
                                                           : bucketBytes)) {
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

//===----------------------------------------------------------------------===//
// dtc-overlap-allreduce
//===----------------------------------------------------------------------===//

struct OverlapAllReducePass
    : public dtc::impl::OverlapAllReduceBase<OverlapAllReducePass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp step = trainStep(getOperation(), *this);
    if (!step)
      return signalPassFailure();
    Block &block = step.front();
    SmallVector<AllReduceBucketOp> buckets(step.getOps<AllReduceBucketOp>());
    llvm::stable_sort(buckets, [](AllReduceBucketOp a, AllReduceBucketOp b) {
      return a.getBucket() < b.getBucket();
    });
    Operation *ret = block.getTerminator();
    for (AllReduceBucketOp bucket : buckets) {
      // Start right after the last gradient of the bucket is produced.
      Operation *last = nullptr;
      for (Value g : bucket.getGrads()) {
        Operation *def = g.getDefiningOp();
        if (!last || last->isBeforeInBlock(def))
          last = def;
      }
      OpBuilder b(step.getContext());
      b.setInsertionPointAfter(last);
      auto start = AllReduceStartOp::create(
          b, bucket.getLoc(), RequestType::get(step.getContext()),
          bucket.getGrads(), bucket.getBucket());
      // Wait after all computation, in bucket order, followed by the
      // bucket's updates (which only read the averaged gradients).
      b.setInsertionPoint(ret);
      auto wait = AllReduceWaitOp::create(b, bucket.getLoc(),
                                          bucket.getResultTypes(), start,
                                          bucket.getGrads(), bucket.getBucket());
      SmallVector<Operation *> updates;
      for (Value r : bucket.getResults())
        for (Operation *u : r.getUsers())
          updates.push_back(u);
      bucket.replaceAllUsesWith(wait.getResults());
      bucket.erase();
      for (Operation *u : updates) {
        if (!isa<ApplyGradientOp>(u)) {
          u->emitError("an averaged gradient may only feed parameter updates");
          return signalPassFailure();
        }
        u->moveBefore(ret);
      }
    }
  }
};

} // namespace
