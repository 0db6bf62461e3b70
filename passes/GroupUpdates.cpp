//===- GroupUpdates.cpp - Consecutive updates as one dtc.update_group -----===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace dtc {
#define GEN_PASS_DEF_GROUPUPDATES
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
/// Whether the update's gradient is the sum of a bucket whose momentum is
/// folded (its plan's momentum_offset, dtc-fold-momentum).
bool momentumFolded(ApplyGradientOp u, DtcDialect *dialect) {
  auto sum = dyn_cast<OpResult>(u.getGrad());
  if (!sum || u.getScale())
    return false;
  Operation *bucket = sum.getOwner();
  if (auto wait = dyn_cast<AllReduceWaitOp>(bucket))
    bucket = wait.getRequest().getDefiningOp();
  if (!bucket || !isa<AllReduceBucketOp, AllReduceStartOp>(bucket))
    return false;
  BucketPlanAttr plan = dialect->getBucketPlanAttrHelper().getAttr(bucket);
  return plan && plan.getMomentumOffset();
}

struct GroupUpdatesPass : public dtc::impl::GroupUpdatesBase<GroupUpdatesPass> {
  void runOnOperation() override {
    DtcDialect *dialect = getContext().getLoadedDialect<DtcDialect>();
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      SmallVector<SmallVector<ApplyGradientOp>> runs;
      bool open = false, runFolded = false;
      for (Operation &op : f.front()) {
        auto u = dyn_cast<ApplyGradientOp>(op);
        if (!u) {
          open = false;
          continue;
        }
        bool folded = momentumFolded(u, dialect);
        if (!open || folded != runFolded ||
            u.getScale() != runs.back().front().getScale())
          runs.emplace_back();
        runs.back().push_back(u);
        open = true;
        runFolded = folded;
      }
      for (auto &run : runs) {
        OpBuilder b(run.front());
        SmallVector<Value> grads;
        SmallVector<Attribute> params;
        for (ApplyGradientOp u : run) {
          grads.push_back(u.getGrad());
          params.push_back(u.getParamAttr());
        }
        auto group = UpdateGroupOp::create(
            b, run.front().getLoc(), grads, b.getArrayAttr(params),
            /*momentum_folded=*/false, run.front().getScale());
        if (momentumFolded(run.front(), dialect))
          group.setMomentumFolded(true);
        for (ApplyGradientOp u : run)
          u.erase();
      }
    }
  }
};
} // namespace
