//===- Optimizer.cpp - Parameter updates and exported gradients -----------===//
#include "passes/Passes.h"
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

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
    Value items = dtcrt::UpdateItemsOp::create(
        l.b, l.loc, dtcrt::ItemsType::get(l.b.getContext()), weights, grads,
        stateBufs, sizes, states);
    Value count = l.i32(weights.size());
    // The clip factor (a float in the arena), else null: no scaling.
    auto gradScale = [&] {
      return op.getGradScale() ? l.ptr(op.getGradScale()) : l.null();
    };
    if (folded)
      dtcrt::SgdApplyMomentumOp::create(l.b, l.loc, items, count, l.hyper());
    else if (opt.getKind() == OptimizerKind::SGD)
      dtcrt::SgdUpdateOp::create(l.b, l.loc, items, count, l.hyper(),
                                 gradScale());
    else {
      Value hyper = l.hyper();
      Value scale = gradScale();
      Value decoupled = l.i1(opt.getKind() == OptimizerKind::AdamW);
      dtcrt::AdamUpdateOp::create(l.b, l.loc, items, count, hyper, scale,
                                  decoupled);
    }
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
