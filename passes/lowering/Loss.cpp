//===- Loss.cpp - Losses, metrics and their gradients ---------------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// A loss or metric of logits [N, ..., C] against class labels [N, ...]: a
/// scalar over the rows of C logits.
template <typename DtcOp, typename CallOp> void addClassLoss(LoweringTable &t) {
  t.add<DtcOp>([](DtcOp op, Lowering &l) {
    auto s = op.getLogits().getType().getShape();
    Value out = l.resultBuffer(op);
    Value rows = l.size(s, 0, s.size() - 1);
    Value classes = l.i64(s.back());
    Value ignore = l.i64(op.getIgnoreIndex());
    CallOp::create(l.b, l.loc, l.ptr(op.getLogits()), l.ptr(op.getLabels()),
                   rows, classes, ignore, out);
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
    Value rows = l.size(s, 0, s.size() - 1);
    Value classes = l.i64(s.back());
    Value ignore = l.i64(op.getIgnoreIndex());
    dtcrt::CrossEntropyGradOp::create(l.b, l.loc, l.ptr(op.getLogits()),
                                      l.ptr(op.getLabels()), rows, classes,
                                      ignore, l.ptr(op.getDloss()), out);
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
