//===- Convolution.cpp - conv2d and its gradients
//--------------------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// The window of a convolution with its weight's kernel.
template <typename Op> shape::Window withKernel(Op op, Type weight) {
  shape::Window w = op.window();
  auto s = cast<RankedTensorType>(weight).getShape();
  w.kernel = {s[2], s[3]};
  return w;
}
} // namespace

void dtc::lowering::populateConvolutionLowerings(LoweringTable &t) {
  t.add<Conv2dOp>([](Conv2dOp op, Lowering &l) {
    Value y = l.resultBuffer(op);
    Value cols = l.scratch(op);
    Value n = l.size(op.getX().getType().getShape(), 0, 1);
    Value window =
        l.window2d(op.getX().getType(), op.getType(),
                   withKernel(op, op.getWeight().getType()), op.getGroups());
    Value bias = op.getBias() ? l.ptr(op.getBias()) : l.null();
    dtcrt::Conv2dOp::create(l.b, l.loc, l.ptr(op.getX()), l.ptr(op.getWeight()),
                            bias, y, cols, n, window);
    return success();
  });
  t.add<Conv2dGradInputOp>([](Conv2dGradInputOp op, Lowering &l) {
    Value dx = l.resultBuffer(op);
    Value cols = l.scratch(op);
    Value n = l.size(op.getType().getShape(), 0, 1);
    Value window =
        l.window2d(op.getType(), op.getDy().getType(),
                   withKernel(op, op.getWeight().getType()), op.getGroups());
    dtcrt::Conv2dGradInputOp::create(l.b, l.loc, l.ptr(op.getDy()),
                                     l.ptr(op.getWeight()), dx, cols, n,
                                     window);
    return success();
  });
  t.add<Conv2dGradWeightOp>([](Conv2dGradWeightOp op, Lowering &l) {
    Value dw = l.resultBuffer(op);
    Value db = op.getBiasGrad() ? l.resultBuffer(op, 1) : l.null();
    Value cols = l.scratch(op);
    Value n = l.size(op.getX().getType().getShape(), 0, 1);
    Value window =
        l.window2d(op.getX().getType(), op.getDy().getType(),
                   withKernel(op, op.getResult().getType()), op.getGroups());
    dtcrt::Conv2dGradWeightOp::create(l.b, l.loc, l.ptr(op.getX()),
                                      l.ptr(op.getDy()), dw, db, cols, n,
                                      window);
    return success();
  });
}
