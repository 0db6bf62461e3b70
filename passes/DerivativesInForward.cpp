//===- DerivativesInForward.cpp - GELU derivatives next to the GELU -------===//
//
// gelu_tanh_grad(x, dy) -> mul(dy, gelu_tanh_deriv(x)), the derivative
// created right after the forward's gelu_tanh(x) (so that fusion puts both
// in one kernel), where x serves only the activation and its gradients; the
// same for the exact gelu. Passes.td has the why.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace dtc {
#define GEN_PASS_DEF_DERIVATIVESINFORWARD
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
struct DerivativesInForwardPass
    : public dtc::impl::DerivativesInForwardBase<DerivativesInForwardPass> {
  void runOnOperation() override;
};

/// Rewrites the gradients Grad(x, dy) of Act(x) into dy * Deriv(x) for
/// every x that feeds nothing else.
template <class Act, class Grad, class Deriv> void rewrite(func::FuncOp func) {
  SmallVector<Act> activations;
  func.walk([&](Act a) { activations.push_back(a); });
  for (Act act : activations) {
    Value x = act.getX();
    SmallVector<Grad> grads;
    bool onlyThese = true;
    for (OpOperand &use : x.getUses()) {
      Operation *user = use.getOwner();
      if (auto g = dyn_cast<Grad>(user); g && use.getOperandNumber() == 0)
        grads.push_back(g);
      else if (!isa<Act>(user) || user->getBlock() != act->getBlock())
        onlyThese = false;
    }
    // The activation of x last before its first gradient gets the
    // derivative: the forward's, or the clone recomputation placed in
    // backward (which then holds x, not the derivative, across the step).
    // (Gradients in another block: the first activation.)
    if (!onlyThese || grads.empty())
      continue;
    SmallVector<Operation *> acts;
    for (Operation *u : x.getUsers())
      if (isa<Act>(u))
        acts.push_back(u);
    llvm::sort(
        acts, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    Operation *chosen = acts.front();
    if (llvm::all_of(
            grads, [&](Grad g) { return g->getBlock() == act->getBlock(); })) {
      Operation *firstGrad = *llvm::min_element(
          grads, [](Grad a, Grad b) { return a->isBeforeInBlock(b); });
      for (Operation *a : acts)
        if (a->isBeforeInBlock(firstGrad))
          chosen = a;
    }
    if (chosen != act.getOperation())
      continue;
    OpBuilder b(act);
    b.setInsertionPointAfter(act);
    Value d = Deriv::create(b, act.getLoc(), x.getType(), x);
    for (Grad g : grads) {
      // Beside the derivative where dy exists there (the clone in
      // backward), so that one kernel reads x once for all three;
      // otherwise at the gradient.
      Operation *dyDef = g.getDy().getDefiningOp();
      if (dyDef && dyDef->getBlock() == act->getBlock() &&
          dyDef->isBeforeInBlock(act))
        b.setInsertionPointAfter(d.getDefiningOp());
      else
        b.setInsertionPoint(g);
      Value prod = MulOp::create(b, g.getLoc(), g.getType(), g.getDy(), d);
      g.getResult().replaceAllUsesWith(prod);
      g.erase();
    }
  }
}
} // namespace

void DerivativesInForwardPass::runOnOperation() {
  func::FuncOp func = getOperation();
  rewrite<GeluTanhOp, GeluTanhGradOp, GeluTanhDerivOp>(func);
  rewrite<GeluOp, GeluGradOp, GeluDerivOp>(func);
}
