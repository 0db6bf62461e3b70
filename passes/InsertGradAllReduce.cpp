//===- InsertGradAllReduce.cpp - Every gradient averaged over the ranks ---===//
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
#define GEN_PASS_DEF_INSERTGRADALLREDUCE
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {

struct InsertGradAllReducePass
    : public dtc::impl::InsertGradAllReduceBase<InsertGradAllReducePass> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp step = steps::trainStep(getOperation(), *this);
    if (!step)
      return signalPassFailure();
    SmallVector<ApplyGradientOp> updates(step.getOps<ApplyGradientOp>());
    for (ApplyGradientOp update : updates) {
      OpBuilder b(update);
      Value g = update.getGrad();
      // Already averaged (IR that has been through this pass).
      if (g.getDefiningOp<AllReduceOp>() ||
          g.getDefiningOp<AllReduceBucketOp>() ||
          g.getDefiningOp<AllReduceWaitOp>())
        continue;
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

} // namespace
