//===- Random.cpp - dropout and its gradient
//-------------------------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

void dtc::lowering::populateRandomLowerings(LoweringTable &t) {
  t.add<DropoutOp>([](DropoutOp op, Lowering &l) {
    Value y = l.resultBuffer(op);
    Value n = l.size(op.getType());
    Value p = l.f32(float(op.getP().convertToDouble()));
    Value seed = dtcrt::StepSeedOp::create(l.b, l.loc, l.b.getI64Type());
    Value salt = l.i64(op.getSalt());
    dtcrt::DropoutOp::create(l.b, l.loc, l.ptr(op.getX()), y, n, p, seed, salt);
    return success();
  });
  t.add<DropoutGradOp>([](DropoutGradOp op, Lowering &l) {
    Value dx = l.resultBuffer(op);
    Value n = l.size(op.getType());
    Value p = l.f32(float(op.getP().convertToDouble()));
    Value seed = dtcrt::StepSeedOp::create(l.b, l.loc, l.b.getI64Type());
    Value salt = l.i64(op.getSalt());
    dtcrt::DropoutGradOp::create(l.b, l.loc, l.ptr(op.getDy()), dx, n, p, seed,
                                 salt);
    return success();
  });
}
