//===- AccumulateGradients.cpp - K micro-batches per optimizer step -------===//
//
// Gradient accumulation compiled in (the recipe's `accumulate = K`): what a
// PyTorch user writes as K backward calls under DDP's no_sync() but the
// last, then optimizer.step(). Decided here, in the IR, for both targets.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Steps.h"

#include "mlir/IR/Builders.h"

namespace dtc {
#define GEN_PASS_DEF_ACCUMULATEGRADIENTS
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {

struct AccumulateGradientsPass
    : public dtc::impl::AccumulateGradientsBase<AccumulateGradientsPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    DtcDialect *dtc = getContext().getLoadedDialect<DtcDialect>();
    if (!dtc || !dtc->getAccumulateAttrHelper().getAttr(module) ||
        module.lookupSymbol(steps::kAccumulate))
      return; // no accumulation, or done already
    func::FuncOp train = steps::trainStep(module, *this);
    if (!train)
      return signalPassFailure();
    if (!train.getOps<AllReduceOp>().empty() ||
        !train.getOps<AllReduceBucketOp>().empty() ||
        !train.getOps<UpdateGroupOp>().empty()) {
      train.emitError("dtc-accumulate-gradients runs before the all-reduces "
                      "are inserted and the updates grouped");
      return signalPassFailure();
    }
    // @accumulate_step: the updates become additions to the accumulators.
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(train);
    auto accumulate = cast<func::FuncOp>(b.clone(*train));
    accumulate.setSymName(steps::kAccumulate);
    SmallVector<ApplyGradientOp> copies(accumulate.getOps<ApplyGradientOp>());
    for (ApplyGradientOp u : copies) {
      OpBuilder at(u);
      AccumulateGradientOp::create(at, u.getLoc(), u.getGrad(),
                                   u.getParamAttr());
      u.erase();
    }
    // @train_step: each update receives its gradient plus the accumulated
    // ones, taken where the gradient is made (the all-reduce of its bucket
    // can start as soon as it exists).
    SmallVector<ApplyGradientOp> updates(train.getOps<ApplyGradientOp>());
    for (ApplyGradientOp u : updates) {
      Value g = u.getGrad();
      OpBuilder at(u);
      at.setInsertionPointAfterValue(g);
      auto sum = TakeAccumulatedOp::create(at, u.getLoc(), g.getType(), g,
                                           u.getParamAttr());
      u.getGradMutable().assign(sum);
    }
  }
};

} // namespace
