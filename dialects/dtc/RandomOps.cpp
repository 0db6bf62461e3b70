//===- RandomOps.cpp - Dropout: verifiers, evaluation form ----------------===//
#include "dialects/dtc/DtcDialect.h"

using namespace mlir;
using namespace dtc;

static LogicalResult checkProbability(Operation *op, double p) {
  if (!(p >= 0.0 && p <= 1.0))
    return op->emitOpError() << "p must be in [0, 1], got " << p;
  return success();
}

LogicalResult DropoutOp::verify() {
  return checkProbability(*this, getP().convertToDouble());
}
LogicalResult DropoutGradOp::verify() {
  return checkProbability(*this, getP().convertToDouble());
}

// In evaluation, dropout passes its input through.
LogicalResult DropoutOp::buildEvalForm(OpBuilder &,
                                       SmallVectorImpl<Value> &results) {
  results.push_back(getX());
  return success();
}
