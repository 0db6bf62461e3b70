//===- DataMovement.cpp - Parameters, views, constants, permutations ------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// An op whose one-float result is a number the step gets at run time.
template <typename DtcOp>
void addScalarFill(LoweringTable &t, dtcrt::StepScalar which) {
  t.add<DtcOp>([which](DtcOp op, Lowering &l) {
    Value out = l.resultBuffer(op);
    Value one = l.i64(1);
    Value v = l.scalar(which);
    dtcrt::FillOp::create(l.b, l.loc, out, one, v);
    return success();
  });
}
} // namespace

void dtc::lowering::populateDataMovementLowerings(LoweringTable &t) {
  // A parameter lives in the persistent block.
  t.add<ParamRefOp>([](ParamRefOp op, Lowering &l) {
    l.map(op, l.persistent(l.placement(op.getParam()).getOffset()));
    return success();
  });
  // A view: its operand's buffer.
  t.add<ReshapeOp>([](ReshapeOp op, Lowering &l) {
    l.map(op, l.ptr(op.getX()));
    return success();
  });
  t.add<ConstantOp>([](ConstantOp op, Lowering &l) {
    Value out = l.resultBuffer(op);
    Value n = l.size(op.getType());
    Value v = l.f32(op.getValue().convertToFloat());
    dtcrt::FillOp::create(l.b, l.loc, out, n, v);
    return success();
  });
  // Numbers of the step (the batch, the gradient seed): one float each.
  addScalarFill<BatchSizeOp>(t, dtcrt::StepScalar::Batch);
  addScalarFill<GradSeedOp>(t, dtcrt::StepScalar::GradSeed);
  t.add<TransposeOp>([](TransposeOp op, Lowering &l) {
    auto xt = op.getX().getType();
    Value shape = l.array(xt.getShape(), 64);
    SmallVector<int64_t> perm(op.getPerm());
    Value p = l.array(perm, 32);
    Value out = l.resultBuffer(op);
    Value rank = l.i32(perm.size());
    dtcrt::PermuteOp::create(l.b, l.loc, l.ptr(op.getX()), out, rank, shape, p);
    return success();
  });
  // The prediction rows of `train --predict` (a null pointer otherwise).
  t.add<ExportPredictionOp>([](ExportPredictionOp op, Lowering &l) {
    auto f32Ptr = dtcrt::PtrType::get(l.b.getContext(), l.b.getF32Type());
    Value rows = dtcrt::StepArgOp::create(l.b, l.loc, f32Ptr,
                                          dtcrt::StepArg::Predictions);
    Value n = l.size(op.getPrediction().getType());
    dtcrt::ExportPredictionOp::create(l.b, l.loc, rows,
                                      l.ptr(op.getPrediction()), n);
    return success();
  });
}
