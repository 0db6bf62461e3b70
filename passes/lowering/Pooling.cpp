//===- Pooling.cpp - max_pool2d, avg_pool2d and their gradients
//------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

void dtc::lowering::populatePoolingLowerings(LoweringTable &t) {
  t.add<MaxPool2dOp>([](MaxPool2dOp op, Lowering &l) {
    Value y = l.resultBuffer(op);
    Value n = l.size(op.getX().getType().getShape(), 0, 1);
    Value window =
        l.window2d(op.getX().getType(), op.getType(), op.window(), 1);
    dtcrt::MaxPool2dOp::create(l.b, l.loc, l.ptr(op.getX()), y, n, window);
    return success();
  });
  t.add<MaxPool2dGradOp>([](MaxPool2dGradOp op, Lowering &l) {
    Value dx = l.resultBuffer(op);
    Value n = l.size(op.getX().getType().getShape(), 0, 1);
    Value window =
        l.window2d(op.getX().getType(), op.getDy().getType(), op.window(), 1);
    dtcrt::MaxPool2dGradOp::create(l.b, l.loc, l.ptr(op.getX()),
                                   l.ptr(op.getDy()), dx, n, window);
    return success();
  });
  t.add<AvgPool2dOp>([](AvgPool2dOp op, Lowering &l) {
    Value y = l.resultBuffer(op);
    Value n = l.size(op.getX().getType().getShape(), 0, 1);
    Value window =
        l.window2d(op.getX().getType(), op.getType(), op.window(), 1);
    Value includePad = l.i1(op.getCountIncludePad());
    dtcrt::AvgPool2dOp::create(l.b, l.loc, l.ptr(op.getX()), y, n, window,
                               includePad);
    return success();
  });
  t.add<AvgPool2dGradOp>([](AvgPool2dGradOp op, Lowering &l) {
    Value dx = l.resultBuffer(op);
    Value n = l.size(op.getType().getShape(), 0, 1);
    Value window =
        l.window2d(op.getType(), op.getDy().getType(), op.window(), 1);
    Value includePad = l.i1(op.getCountIncludePad());
    dtcrt::AvgPool2dGradOp::create(l.b, l.loc, l.ptr(op.getDy()), dx, n, window,
                                   includePad);
    return success();
  });
}
