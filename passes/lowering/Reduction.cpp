//===- Reduction.cpp - Reductions, sum_to and the softmax family ----------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// An op over the axis view [outer, n, inner] of its input: x -> y.
template <typename DtcOp, typename CallOp> void addAxisOp(LoweringTable &t) {
  t.add<DtcOp>([](DtcOp op, Lowering &l) {
    auto [outer, n, inner] = l.axisView(op.getX().getType(), op.getAxis());
    Value out = l.resultBuffer(op);
    CallOp::create(l.b, l.loc, l.ptr(op.getX()), out, outer, n, inner);
    return success();
  });
}

/// The gradient of a softmax-like op from its result: (y, dy) -> dx.
template <typename DtcOp, typename CallOp>
void addSoftmaxGrad(LoweringTable &t) {
  t.add<DtcOp>([](DtcOp op, Lowering &l) {
    auto [outer, n, inner] = l.axisView(op.getType(), op.getAxis());
    Value out = l.resultBuffer(op);
    CallOp::create(l.b, l.loc, l.ptr(op.getY()), l.ptr(op.getDy()), out, outer,
                   n, inner);
    return success();
  });
}
} // namespace

void dtc::lowering::populateReductionLowerings(LoweringTable &t) {
  addAxisOp<ReduceSumOp, dtcrt::ReduceSumOp>(t);
  addAxisOp<ReduceMeanOp, dtcrt::ReduceMeanOp>(t);
  addAxisOp<ReduceMaxOp, dtcrt::ReduceMaxOp>(t);
  addAxisOp<SoftmaxOp, dtcrt::SoftmaxOp>(t);
  addAxisOp<LogSoftmaxOp, dtcrt::LogSoftmaxOp>(t);
  addSoftmaxGrad<SoftmaxGradOp, dtcrt::SoftmaxGradOp>(t);
  addSoftmaxGrad<LogSoftmaxGradOp, dtcrt::LogSoftmaxGradOp>(t);
  t.add<ReduceMaxGradOp>([](ReduceMaxGradOp op, Lowering &l) {
    auto [outer, n, inner] = l.axisView(op.getX().getType(), op.getAxis());
    Value out = l.resultBuffer(op);
    dtcrt::ReduceMaxGradOp::create(l.b, l.loc, l.ptr(op.getX()),
                                   l.ptr(op.getY()), l.ptr(op.getDy()), out,
                                   outer, n, inner);
    return success();
  });
  t.add<SumToOp>([](SumToOp op, Lowering &l) {
    auto xt = op.getX().getType();
    auto yt = op.getType();
    Value xs = l.array(xt.getShape(), 64), ys = l.array(yt.getShape(), 64);
    Value out = l.resultBuffer(op);
    Value xRank = l.i32(xt.getRank());
    Value yRank = l.i32(yt.getRank());
    dtcrt::SumToOp::create(l.b, l.loc, l.ptr(op.getX()), xRank, xs, out, yRank,
                           ys);
    return success();
  });
}
