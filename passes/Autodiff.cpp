//===- Autodiff.cpp - Reverse-mode differentiation of the forward graph --===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace dtc {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
struct AutodiffPass : public dtc::impl::AutodiffBase<AutodiffPass> {
  using Base::Base;
  void runOnOperation() override;
};
} // namespace

/// Builds reverse-mode gradients inside `step` (a clone of the forward
/// function) and the parameter updates; fails with a diagnostic on ops that
/// have no gradient but lie on a path from a parameter to the loss.
static LogicalResult differentiate(func::FuncOp step) {
  Block &body = step.front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  auto lossType = dyn_cast<RankedTensorType>(loss.getType());
  if (!lossType || lossType.getRank() != 0)
    return step.emitError("the loss (first result of @forward) must be a "
                          "0-d tensor");

  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator())
    forwardOps.push_back(&op);
  // Activity: the values that depend on a parameter. Only they take
  // gradients; everything else (inputs, labels, metrics of the data) is
  // constant for differentiation.
  DenseSet<Value> active;
  for (Operation *op : forwardOps) {
    bool dependsOnParam =
        isa<ParamRefOp>(op) || llvm::any_of(op->getOperands(), [&](Value v) {
          return active.contains(v);
        });
    if (dependsOnParam)
      active.insert(op->result_begin(), op->result_end());
  }

  OpBuilder b(ret);
  DenseMap<Value, Value> grads;
  auto accumulate = [&](Value v, Value g) {
    auto it = grads.find(v);
    if (it == grads.end()) {
      grads[v] = g;
      return;
    }
    it->second = AddOp::create(b, g.getLoc(), v.getType(), it->second, g);
  };
  grads[loss] = GradSeedOp::create(b, loss.getLoc(), lossType);

  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      Value g = grads.lookup(r);
      any |= bool(g);
      resultGrads.push_back(g);
    }
    if (!any || op->getNumOperands() == 0 || // leaves: params, constants
        !llvm::any_of(op->getResults(),
                      [&](Value r) { return active.contains(r); }))
      continue;
    auto diff = dyn_cast<GradientOpInterface>(op);
    if (!diff)
      return op->emitError("'")
             << op->getName() << "' is not differentiable but the loss "
             << "depends on it through a parameter";
    // Results without a gradient contribute zero (a batch-shaped one
    // broadcast from a 0-d zero: constants are static).
    for (auto [r, g] : llvm::zip(op->getResults(), resultGrads))
      if (!g) {
        auto t = cast<RankedTensorType>(r.getType());
        auto zeroType = t.hasStaticShape()
                            ? t
                            : RankedTensorType::get({}, t.getElementType());
        g = ConstantOp::create(b, op->getLoc(), zeroType,
                               b.getF32FloatAttr(0.0f));
        if (!t.hasStaticShape())
          g = BroadcastToOp::create(b, op->getLoc(), t, g);
      }
    SmallVector<Value> operandGrads;
    if (failed(diff.buildGradients(b, resultGrads, operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitError("gradient builder returned ")
             << operandGrads.size() << " gradients for " << op->getNumOperands()
             << " operands";
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g && active.contains(operand))
        accumulate(operand, g);
  }

  // One update per parameter, summing over all reads of it, in the order of
  // the parameters' declarations.
  llvm::MapVector<StringAttr, Value> paramGrads;
  for (Operation *op : forwardOps) {
    auto ref = dyn_cast<ParamRefOp>(op);
    if (!ref)
      continue;
    Value g = grads.lookup(ref.getResult());
    if (!g)
      continue;
    StringAttr name = ref.getParamAttr().getAttr();
    auto [it, inserted] = paramGrads.insert({name, g});
    if (!inserted)
      it->second = AddOp::create(b, ref.getLoc(), g.getType(), it->second, g);
  }
  auto module = step->getParentOfType<ModuleOp>();
  SmallVector<std::pair<StringAttr, Value>> ordered;
  for (auto param : module.getOps<ParamOp>()) {
    StringAttr name = param.getSymNameAttr();
    auto it = paramGrads.find(name);
    if (it == paramGrads.end()) {
      param.emitWarning("parameter '")
          << name.getValue() << "' does not affect the loss; it is not trained";
      continue;
    }
    ApplyGradientOp::create(b, param.getLoc(), it->second,
                            FlatSymbolRefAttr::get(name));
  }
  return success();
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward) {
    module.emitError("dtc-autodiff needs a func.func @forward");
    return signalPassFailure();
  }
  if (forward.getNumResults() == 0) {
    forward.emitError("@forward must return the loss as its first result");
    return signalPassFailure();
  }
  if (module.lookupSymbol("train_step")) {
    module.emitError("the module already has a @train_step");
    return signalPassFailure();
  }
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(forward);
  auto step = cast<func::FuncOp>(b.clone(*forward));
  step.setSymName("train_step");
  if (failed(differentiate(step)))
    return signalPassFailure();
}
