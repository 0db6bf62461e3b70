//===- OverlapAllReduce.cpp - Splits bucket all-reduces into start/wait
//-----===//
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
#define GEN_PASS_DEF_OVERLAPALLREDUCE
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {

struct OverlapAllReducePass
    : public dtc::impl::OverlapAllReduceBase<OverlapAllReducePass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp step = steps::trainStep(getOperation(), *this);
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
      auto wait =
          AllReduceWaitOp::create(b, bucket.getLoc(), bucket.getResultTypes(),
                                  start, bucket.getGrads(), bucket.getBucket());
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
