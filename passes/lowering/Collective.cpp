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

int64_t dtc::lowering::numShardedBuckets(Lowering &l) {
  return int64_t(l.shardedPlans.size());
}

BucketPlanAttr dtc::lowering::shardedBucketPlan(int64_t bucket, Lowering &l) {
  return l.shardedPlans.lookup(bucket);
}

void dtc::lowering::populateCollectiveLowerings(LoweringTable &t) {
  t.add<AllReduceOp>([](AllReduceOp op, Lowering &l) {
    // Not bucketed (dtc-bucket-allreduce did not run): a bucket of one,
    // numbered after the planned ones.
    Value r = start(op, -1 - l.looseCollectives++, l);
    dtcrt::WaitOp::create(l.b, l.loc, r);
    return success();
  });
  t.add<AllReduceBucketOp>([](AllReduceBucketOp op, Lowering &l) {
    Value r = start(op, op.getBucket(), l);
    dtcrt::WaitOp::create(l.b, l.loc, r);
    return success();
  });
  t.add<AllReduceStartOp>([](AllReduceStartOp op, Lowering &l) {
    l.map(op.getRequest(), start(op, op.getBucket(), l));
    return success();
  });
  // Sharded data parallelism (dtc-shard-weight-update).
  t.add<ReduceScatterStartOp>([](ReduceScatterStartOp op, Lowering &l) {
    BucketPlanAttr plan = l.dtc->getBucketPlanAttrHelper().getAttr(op);
    auto f32Ptr = dtcrt::PtrType::get(l.b.getContext(), l.b.getF32Type());
    Value buf = dtcrt::BufferOp::create(l.b, l.loc, f32Ptr, dtcrt::Space::Fixed,
                                        plan.getOffset());
    // The bucket's gaps (between its gradients, and its padding) are
    // zeroed: a shard is summed, clipped and updated whole, and its
    // parameters' gaps stay zero.
    SmallVector<std::pair<int64_t, int64_t>> members; // [begin, end) floats
    for (Value g : op.getGrads()) {
      auto r = cast<OpResult>(g);
      int64_t at = (l.dtc->getOffsetsAttrHelper().getAttr(
                        r.getOwner())[r.getResultNumber()] -
                    plan.getOffset()) /
                   4;
      members.push_back(
          {at, at + cast<RankedTensorType>(g.getType()).getNumElements()});
    }
    llvm::sort(members);
    members.push_back({plan.getCount(), plan.getCount()});
    int64_t end = 0;
    for (auto [begin, next] : members) {
      if (begin > end) {
        Value gap = dtcrt::OffsetOp::create(l.b, l.loc, f32Ptr, buf, end);
        Value n = l.i64(begin - end);
        Value zero = l.f32(0.0f);
        dtcrt::FillOp::create(l.b, l.loc, gap, n, zero);
      }
      end = std::max(end, next);
    }
    const int64_t shard = *plan.getShard();
    Value out =
        op.getInPlace()
            ? dtcrt::RankOffsetOp::create(l.b, l.loc, f32Ptr, buf, shard)
                  .getResult()
            : l.resultBuffer(op, 1);
    Value n = l.i64(shard);
    l.map(op.getShard(), out);
    l.map(op.getRequest(),
          dtcrt::ReduceScatterStartOp::create(
              l.b, l.loc, dtcrt::RequestType::get(l.b.getContext()), buf, out,
              n, op.getBucket()));
    return success();
  });
  t.add<ReduceScatterWaitOp>([](ReduceScatterWaitOp op, Lowering &l) {
    dtcrt::WaitOp::create(l.b, l.loc, l.ptr(op.getRequest()));
    l.map(op.getResult(), l.ptr(op.getShard()));
    return success();
  });
  t.add<AllGatherStartOp>([](AllGatherStartOp op, Lowering &l) {
    BucketPlanAttr plan = shardedBucketPlan(op.getBucket(), l);
    if (!plan) {
      op.emitError("no reduce-scatter of bucket ") << op.getBucket();
      return failure();
    }
    Value params = l.persistent(*plan.getParamOffset());
    Value n = l.i64(*plan.getShard());
    Value request = dtcrt::AllgatherStartOp::create(
        l.b, l.loc, dtcrt::RequestType::get(l.b.getContext()), params, n,
        op.getBucket());
    l.map(op.getRequest(), request);
    if (op.getCarried()) // the next step waits for it
      dtcrt::CarryOp::create(l.b, l.loc, request, op.getBucket());
    return success();
  });
  // Stage 3: this rank's shard of the bucket's parameters into its place in
  // the gathered buffer, then the all-gather there.
  t.add<GatherParamsStartOp>([](GatherParamsStartOp op, Lowering &l) {
    BucketPlanAttr plan = shardedBucketPlan(
        int64_t(op.getBucket()) % std::max<int64_t>(1, numShardedBuckets(l)),
        l);
    if (!plan) {
      op.emitError("no reduce-scatter of bucket ") << op.getBucket();
      return failure();
    }
    auto f32Ptr = dtcrt::PtrType::get(l.b.getContext(), l.b.getF32Type());
    Value gathered = l.resultBuffer(op, 1);
    const int64_t shard = *plan.getShard();
    Value mine =
        dtcrt::RankOffsetOp::create(l.b, l.loc, f32Ptr, gathered, shard);
    Value params = l.persistent(*plan.getParamOffset());
    Value n = l.i64(shard);
    dtcrt::CopyOp::create(l.b, l.loc, mine, params, n);
    l.map(op.getRequest(),
          dtcrt::AllgatherStartOp::create(
              l.b, l.loc, dtcrt::RequestType::get(l.b.getContext()), gathered,
              n, op.getBucket()));
    return success();
  });
  t.add<GatherParamsWaitOp>([](GatherParamsWaitOp op, Lowering &l) {
    dtcrt::WaitOp::create(l.b, l.loc, l.ptr(op.getRequest()));
    l.map(op.getResult(), l.ptr(op.getGathered()));
    return success();
  });
  t.add<ParamViewOp>([](ParamViewOp op, Lowering &l) {
    auto f32Ptr = dtcrt::PtrType::get(l.b.getContext(), l.b.getF32Type());
    l.map(op.getResult(),
          dtcrt::OffsetOp::create(l.b, l.loc, f32Ptr, l.ptr(op.getGathered()),
                                  op.getOffset()));
    return success();
  });
  t.add<AllGatherWaitOp>([](AllGatherWaitOp op, Lowering &l) {
    if (op.getRequest())
      dtcrt::WaitOp::create(l.b, l.loc, l.ptr(op.getRequest()));
    else
      dtcrt::WaitCarriedOp::create(l.b, l.loc, op.getBucket());
    return success();
  });
  t.add<AllReduceWaitOp>([](AllReduceWaitOp op, Lowering &l) {
    dtcrt::WaitOp::create(l.b, l.loc, l.ptr(op.getRequest()));
    return success();
  });
}
