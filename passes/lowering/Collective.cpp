//===- Collective.cpp - Gradient all-reduces ------------------------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// Starts the all-reduce of a bucket: its planned buffer, or its momentum
/// buffers when the momentum is folded into it (dtc-fold-momentum).
Value start(Operation *op, int64_t bucket, Lowering &l) {
  BucketPlanAttr plan = l.dtc->getBucketPlanAttrHelper().getAttr(op);
  Value buf;
  if (auto m = plan.getMomentumOffset())
    buf = l.persistent(*m);
  else
    buf = dtcrt::BufferOp::create(
        l.b, l.loc, dtcrt::PtrType::get(l.b.getContext(), l.b.getF32Type()),
        dtcrt::Space::Fixed, plan.getOffset());
  auto s = dtcrt::AllreduceStartOp::create(
      l.b, l.loc, dtcrt::RequestType::get(l.b.getContext()), buf,
      l.i64(plan.getCount()), bucket);
  // The sums are where the gradients are (in place).
  for (auto [g, sum] : llvm::zip(op->getOperands(), sumsOf(op)))
    l.map(sum, l.ptr(g));
  return s;
}
} // namespace

void dtc::lowering::populateCollectiveLowerings(LoweringTable &t) {
  t.add<AllReduceOp>([](AllReduceOp op, Lowering &l) {
    // Not bucketed (dtc-bucket-allreduce did not run): a bucket of one,
    // numbered after the planned ones.
    Value r = start(op, -1 - l.looseCollectives++, l);
    dtcrt::AllreduceWaitOp::create(l.b, l.loc, r);
    return success();
  });
  t.add<AllReduceBucketOp>([](AllReduceBucketOp op, Lowering &l) {
    Value r = start(op, op.getBucket(), l);
    dtcrt::AllreduceWaitOp::create(l.b, l.loc, r);
    return success();
  });
  t.add<AllReduceStartOp>([](AllReduceStartOp op, Lowering &l) {
    l.map(op.getRequest(), start(op, op.getBucket(), l));
    return success();
  });
  t.add<AllReduceWaitOp>([](AllReduceWaitOp op, Lowering &l) {
    dtcrt::AllreduceWaitOp::create(l.b, l.loc, l.ptr(op.getRequest()));
    return success();
  });
}
