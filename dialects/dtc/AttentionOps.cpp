//===- AttentionOps.cpp - Scaled dot-product attention: verifiers --------===//
//
// attention and its gradient check q, k, v and their results against
// dtc::shape::attention, as the DSL frontend does, and the scale.
//
//===----------------------------------------------------------------------===//
#include "dialects/dtc/DtcDialect.h"

using namespace mlir;
using namespace dtc;

namespace {
LogicalResult checkAttention(Operation *op, Type q, Type k, Type v, Type result,
                             Type lse, bool causal, double scale) {
  auto t = shape::attention(op->getLoc(), q, k, v, causal);
  if (failed(t))
    return failure();
  if (t->first != result || t->second != lse)
    return op->emitOpError("result and lse must be ")
           << t->first << " and " << t->second << ", got " << result << " and "
           << lse;
  if (!(scale > 0) || !std::isfinite(scale))
    return op->emitOpError("scale must be finite and > 0, got ") << scale;
  return success();
}
} // namespace

LogicalResult AttentionOp::verify() {
  return checkAttention(*this, getQ().getType(), getK().getType(),
                        getV().getType(), getResult().getType(),
                        getLse().getType(), getCausal(),
                        getScale().convertToDouble());
}

LogicalResult AttentionGradOp::verify() {
  return checkAttention(*this, getQ().getType(), getK().getType(),
                        getV().getType(), getOut().getType(),
                        getLse().getType(), getCausal(),
                        getScale().convertToDouble());
}
