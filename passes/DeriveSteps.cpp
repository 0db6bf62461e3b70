//===- DeriveSteps.cpp - @eval_step and @grad_step as functions -----------===//
#include "passes/Passes.h"
#include "passes/Steps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace dtc {
#define GEN_PASS_DEF_DERIVESTEPS
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
struct DeriveStepsPass : public dtc::impl::DeriveStepsBase<DeriveStepsPass> {
  void runOnOperation() override;
};

/// @grad_step's body from a copy of @train_step: updates become exports,
/// collectives their operands.
void exportGradients(func::FuncOp step, ModuleOp module) {
  llvm::StringMap<int64_t> packed;
  int64_t at = 0;
  for (ParamOp p : module.getOps<ParamOp>()) {
    packed[p.getSymName()] = at;
    at += cast<RankedTensorType>(p.getType()).getNumElements();
  }
  SmallVector<Operation *> collectives;
  step.walk([&](Operation *op) {
    if (isa<AllReduceOp, AllReduceBucketOp, AllReduceStartOp, AllReduceWaitOp>(
            op))
      collectives.push_back(op);
  });
  // Waits and single all-reduces first: their results are the averages.
  for (Operation *op : collectives) {
    if (auto tied = dyn_cast<TiedOpInterface>(op))
      for (OpResult r : op->getResults())
        r.replaceAllUsesWith(tied.getTiedOperand(r.getResultNumber()));
  }
  for (Operation *op : llvm::reverse(collectives))
    op->erase();
  SmallVector<ApplyGradientOp> updates(step.getOps<ApplyGradientOp>());
  for (ApplyGradientOp u : updates) {
    OpBuilder b(u);
    ExportGradientOp::create(b, u.getLoc(), u.getGrad(), u.getParamAttr(),
                             b.getI64IntegerAttr(packed.lookup(u.getParam())));
    u.erase();
  }
}
} // namespace

void DeriveStepsPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (module.lookupSymbol(steps::kEval) && module.lookupSymbol(steps::kGrad))
    return; // derived already
  auto forward = module.lookupSymbol<func::FuncOp>(steps::kForward);
  auto train = module.lookupSymbol<func::FuncOp>(steps::kTrain);
  if (!forward || !train) {
    module.emitError("dtc-derive-steps needs @forward and @train_step (run "
                     "dtc-autodiff first)");
    return signalPassFailure();
  }
  DtcDialect *dialect = module->getContext()->getLoadedDialect<DtcDialect>();
  dialect->getTracedAttrHelper().setAttr(train,
                                         UnitAttr::get(module->getContext()));
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(train);
  auto grad = cast<func::FuncOp>(b.clone(*train));
  grad.setSymName(steps::kGrad);
  dialect->getTracedAttrHelper().removeAttr(grad);
  exportGradients(grad, module);
  forward.setSymName(steps::kEval);
  // What `train --predict` and `--sample` read: the logits of the first
  // cross_entropy (or the prediction of the first mse) over a batch [B, ...]
  // ([B, k], or a language model's [B, T, V]).
  Value prediction;
  forward.walk([&](Operation *op) {
    if (prediction)
      return;
    if (auto ce = dyn_cast<CrossEntropyOp>(op))
      prediction = ce.getLogits();
    else if (auto mse = dyn_cast<MseOp>(op))
      prediction = mse.getPrediction();
  });
  auto pt = prediction ? cast<RankedTensorType>(prediction.getType())
                       : RankedTensorType();
  if (pt && pt.getRank() >= 2 && ShapedType::isDynamic(pt.getDimSize(0))) {
    OpBuilder at(forward.front().getTerminator());
    ExportPredictionOp::create(at, forward.getLoc(), prediction);
  }
  // The evaluation mode: ops that compute otherwise there (dropout, batch
  // normalization) in their evaluation form.
  SmallVector<ModeOpInterface> modal;
  forward.walk([&](ModeOpInterface op) { modal.push_back(op); });
  for (ModeOpInterface op : modal) {
    OpBuilder at(op);
    SmallVector<Value> results;
    if (failed(op.buildEvalForm(at, results)))
      return signalPassFailure();
    op->replaceAllUsesWith(results);
    op->erase();
  }
}
