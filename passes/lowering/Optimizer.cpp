//===- Optimizer.cpp - Parameter updates and exported gradients -----------===//
#include "passes/Passes.h"
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// One call of the optimizer's kernel over `weights` (their gradients,
/// `states` state buffers each, and sizes); with `scale` (the clip factor,
/// a float in the arena) every gradient is multiplied by it as it is read.
void update(Lowering &l, ArrayRef<Value> weights, ArrayRef<Value> grads,
            ArrayRef<Value> stateBufs, ArrayRef<Value> sizes, int states,
            bool folded, Value scale) {
  OptimizerAttr opt = optimizerOf(l.module);
  Value items = dtcrt::UpdateItemsOp::create(
      l.b, l.loc, dtcrt::ItemsType::get(l.b.getContext()), weights, grads,
      stateBufs, sizes, states);
  Value count = l.i32(weights.size());
  auto gradScale = [&] { return scale ? l.ptr(scale) : l.null(); };
  if (folded)
    dtcrt::SgdApplyMomentumOp::create(l.b, l.loc, items, count, l.hyper());
  else if (opt.getKind() == OptimizerKind::SGD)
    dtcrt::SgdUpdateOp::create(l.b, l.loc, items, count, l.hyper(),
                               gradScale());
  else {
    Value hyper = l.hyper();
    Value s = gradScale();
    Value decoupled = l.i1(opt.getKind() == OptimizerKind::AdamW);
    dtcrt::AdamUpdateOp::create(l.b, l.loc, items, count, hyper, s, decoupled);
  }
}
} // namespace

void dtc::lowering::populateOptimizerLowerings(LoweringTable &t) {
  // Gradient clipping: the squares of every gradient added into one float,
  // then the factor from the run's max norm.
  t.add<SumSquaresOp>([](SumSquaresOp op, Lowering &l) {
    Value acc = l.resultBuffer(op);
    Value one = l.i64(1);
    Value zero = l.f32(0.0f);
    dtcrt::FillOp::create(l.b, l.loc, acc, one, zero);
    for (Value x : op.getXs()) {
      Value n = l.size(x.getType());
      dtcrt::SumSquaresOp::create(l.b, l.loc, l.ptr(x), n, acc);
    }
    return success();
  });
  t.add<ClipCoefOp>([](ClipCoefOp op, Lowering &l) {
    Value out = l.resultBuffer(op);
    dtcrt::ClipCoefOp::create(l.b, l.loc, l.ptr(op.getSumSquares()), l.hyper(),
                              out);
    return success();
  });
  // Gradient accumulation: the accumulators are where dtc-plan-memory
  // placed them in the persistent block.
  auto accumulator = [](Operation *op, Lowering &l) {
    DtcDialect *dtc = op->getContext()->getLoadedDialect<DtcDialect>();
    return l.persistent(dtc->getPlacementAttrHelper().getAttr(op).getOffset());
  };
  t.add<AccumulateGradientOp>(
      [accumulator](AccumulateGradientOp op, Lowering &l) {
        Value acc = accumulator(op, l);
        Value n = l.size(op.getGrad().getType());
        dtcrt::AccumulateOp::create(l.b, l.loc, acc, l.ptr(op.getGrad()), n);
        return success();
      });
  t.add<TakeAccumulatedOp>([accumulator](TakeAccumulatedOp op, Lowering &l) {
    Value acc = accumulator(op, l);
    Value out = l.resultBuffer(op);
    Value n = l.size(op.getGrad().getType());
    dtcrt::TakeAccumulatedOp::create(l.b, l.loc, acc, l.ptr(op.getGrad()), out,
                                     n);
    return success();
  });
  // One call of the optimizer's kernel for the whole group.
  t.add<UpdateGroupOp>([](UpdateGroupOp op, Lowering &l) {
    OptimizerAttr opt = optimizerOf(l.module);
    bool folded = op.getMomentumFolded();
    int states = folded ? 0 : opt.numStateBuffers();
    SmallVector<Value> weights, grads, stateBufs, sizes;
    for (auto [param, grad] : llvm::zip(op.getParams(), op.getGrads())) {
      PlacementAttr at = l.placement(cast<FlatSymbolRefAttr>(param).getValue());
      const int64_t state = at.getStateOffset().value_or(0);
      int64_t bytes =
          cast<RankedTensorType>(grad.getType()).getNumElements() * 4;
      weights.push_back(l.persistent(at.getOffset()));
      // Folded: the summed momentum buffer is the gradient.
      grads.push_back(folded ? l.persistent(state) : l.ptr(grad));
      for (int s = 0; s < states; ++s)
        stateBufs.push_back(l.persistent(state + s * bytes));
      sizes.push_back(l.size(grad.getType()));
    }
    update(l, weights, grads, stateBufs, sizes, states, folded,
           op.getGradScale());
    return success();
  });
  // Sharded: one item, this rank's shard of the bucket's parameters, its
  // summed gradients and its state.
  t.add<ShardUpdateOp>([](ShardUpdateOp op, Lowering &l) {
    BucketPlanAttr plan = shardedBucketPlan(op.getBucket(), l);
    if (!plan) {
      op.emitError("no reduce-scatter of bucket ") << op.getBucket();
      return failure();
    }
    const int64_t shard = *plan.getShard();
    const int states = optimizerOf(l.module).numStateBuffers();
    auto f32Ptr = dtcrt::PtrType::get(l.b.getContext(), l.b.getF32Type());
    // (Stage 3: the persistent block holds the shard only.)
    Value params = l.persistent(*plan.getParamOffset());
    ShardAttr sharding = shardOf(l.module);
    Value w =
        sharding.getStage() == ShardStage::Parameters
            ? params
            : dtcrt::RankOffsetOp::create(l.b, l.loc, f32Ptr, params, shard)
                  .getResult();
    SmallVector<Value> stateBufs;
    for (int s = 0; s < states; ++s)
      stateBufs.push_back(l.persistent(*plan.getStateOffset() + s * shard * 4));
    Value n = l.i64(shard);
    update(l, {w}, {l.ptr(op.getShard())}, stateBufs, {n}, states,
           /*folded=*/false, op.getGradScale());
    return success();
  });
  // The gradient-only step: each gradient to its place in the packed vector.
  t.add<ExportGradientOp>([](ExportGradientOp op, Lowering &l) {
    auto f32Ptr = dtcrt::PtrType::get(l.b.getContext(), l.b.getF32Type());
    Value grads = dtcrt::StepArgOp::create(l.b, l.loc, f32Ptr,
                                           dtcrt::StepArg::ParamGrads);
    Value at =
        dtcrt::OffsetOp::create(l.b, l.loc, f32Ptr, grads, op.getOffset());
    dtcrt::CopyOp::create(l.b, l.loc, at, l.ptr(op.getGrad()),
                          l.size(op.getGrad().getType()));
    return success();
  });
}
