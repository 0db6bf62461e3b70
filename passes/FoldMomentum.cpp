//===- FoldMomentum.cpp - SGD momentum folded into the gradient buckets ---===//
#include "passes/Passes.h"
#include "passes/Steps.h"

#include "llvm/ADT/StringSet.h"

namespace dtc {
#define GEN_PASS_DEF_FOLDMOMENTUM
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
/// The buckets, when every collective of @train_step is a planned bucket
/// whose sums feed one parameter update each; else none.
std::optional<SmallVector<MirroredBucket>> momentumBuckets(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>(steps::kTrain);
  if (!step || step.isExternal())
    return std::nullopt;
  // Clipped updates scale the summed gradients (dtc-clip-grad-norm): the
  // momentum must take them after the scale, so it cannot be summed.
  for (auto u : step.getOps<ApplyGradientOp>())
    if (u.getScale())
      return std::nullopt;
  SmallVector<MirroredBucket> buckets;
  llvm::StringSet<> seen;
  DtcDialect *dialect = module->getContext()->getLoadedDialect<DtcDialect>();
  bool ok = true;
  step.walk([&](Operation *op) {
    if (isa<AllReduceOp>(op)) {
      ok = false; // not bucketed: no planned bucket buffer
      return;
    }
    if (!isa<AllReduceBucketOp, AllReduceStartOp>(op))
      return;
    BucketPlanAttr plan = dialect->getBucketPlanAttrHelper().getAttr(op);
    if (!plan) {
      ok = false;
      return;
    }
    // The sums (the bucket op's results, or its wait's) each feed one
    // update.
    if (auto start = dyn_cast<AllReduceStartOp>(op))
      if (!start.getRequest().hasOneUse() ||
          sumsOf(op).size() != op->getNumOperands()) {
        ok = false;
        return;
      }
    std::optional<MirroredBucket> bucket = mirroredBucket(op, seen);
    if (!bucket) {
      ok = false;
      return;
    }
    buckets.push_back(std::move(*bucket));
  });
  if (!ok || buckets.empty())
    return std::nullopt;
  return buckets;
}

struct FoldMomentumPass : public dtc::impl::FoldMomentumBase<FoldMomentumPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    OptimizerAttr opt = optimizerOf(module);
    if (!opt || !opt.isFoldableMomentum())
      return;
    DtcDialect *dialect = module->getContext()->getLoadedDialect<DtcDialect>();
    if (!dialect->getPersistentAttrHelper().getAttr(module)) {
      module.emitError(
          "dtc-fold-momentum needs a memory plan (run dtc-plan-memory first)");
      return signalPassFailure();
    }
    if (auto buckets = momentumBuckets(module))
      layoutPersistent(module, alignment, *buckets);
  }
};
} // namespace
