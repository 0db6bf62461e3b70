//===- DataMovement.cpp - Parameters, views, constants, permutations ------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

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
  t.add<BatchSizeOp>([](BatchSizeOp op, Lowering &l) {
    Value out = l.resultBuffer(op);
    Value one = l.i64(1);
    Value v = l.scalar(dtcrt::StepScalar::Batch);
    dtcrt::FillOp::create(l.b, l.loc, out, one, v);
    return success();
  });
  t.add<GradSeedOp>([](GradSeedOp op, Lowering &l) {
    Value out = l.resultBuffer(op);
    Value one = l.i64(1);
    Value v = l.scalar(dtcrt::StepScalar::GradSeed);
    dtcrt::FillOp::create(l.b, l.loc, out, one, v);
    return success();
  });
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
}
