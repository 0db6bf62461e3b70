//===- Loss.cpp - Losses, metrics and their gradients ---------------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// A loss or metric of logits [B, C] against class labels: a scalar.
template <typename DtcOp, typename CallOp> void addClassLoss(LoweringTable &t) {
  t.add<DtcOp>([](DtcOp op, Lowering &l) {
    auto s = op.getLogits().getType().getShape();
    Value out = l.resultBuffer(op);
    Value batch = l.size(s, 0, 1);
    Value classes = l.size(s, 1, 2);
    CallOp::create(l.b, l.loc, l.ptr(op.getLogits()), l.ptr(op.getLabels()),
                   batch, classes, out);
    return success();
  });
}
} // namespace

void dtc::lowering::populateLossLowerings(LoweringTable &t) {
  addClassLoss<CrossEntropyOp, dtcrt::CrossEntropyOp>(t);
  addClassLoss<AccuracyOp, dtcrt::AccuracyOp>(t);
  t.add<CrossEntropyGradOp>([](CrossEntropyGradOp op, Lowering &l) {
    auto s = op.getLogits().getType().getShape();
    Value out = l.resultBuffer(op);
    Value batch = l.size(s, 0, 1);
    Value classes = l.size(s, 1, 2);
    dtcrt::CrossEntropyGradOp::create(l.b, l.loc, l.ptr(op.getLogits()),
                                      l.ptr(op.getLabels()), batch, classes,
                                      l.ptr(op.getDloss()), out);
    return success();
  });
  t.add<MseOp>([](MseOp op, Lowering &l) {
    Value out = l.resultBuffer(op);
    dtcrt::MseOp::create(l.b, l.loc, l.ptr(op.getPrediction()),
                         l.ptr(op.getTarget()),
                         l.size(op.getPrediction().getType()), out);
    return success();
  });
  t.add<MseGradOp>([](MseGradOp op, Lowering &l) {
    Value out = l.resultBuffer(op);
    dtcrt::MseGradOp::create(
        l.b, l.loc, l.ptr(op.getPrediction()), l.ptr(op.getTarget()),
        l.size(op.getPrediction().getType()), l.ptr(op.getDloss()), out);
    return success();
  });
}
