//===- AttentionOps.cpp - Scaled dot-product attention: verifiers --------===//
//
// attention and its gradient check q, k, v and their results against
// dtc::shape::attention, as the DSL frontend does (tokens-first operands
// as the head-major ones they stand for), and the scale.
//
//===----------------------------------------------------------------------===//
#include "dialects/dtc/DtcDialect.h"

using namespace mlir;
using namespace dtc;

namespace {
using shape::swapTokensAndHeads;

LogicalResult checkAttention(Operation *op, Type q, Type k, Type v, Type result,
                             Type lse, bool causal, double scale,
                             bool tokensFirst) {
  if (tokensFirst) {
    for (Type t : {q, k, v, result})
      if (cast<RankedTensorType>(t).getRank() < 3)
        return op->emitOpError("tokens_first needs q, k, v and the result of "
                               "rank 3 or more ([..., T, H, D]), got ")
               << t;
    q = swapTokensAndHeads(q);
    k = swapTokensAndHeads(k);
    v = swapTokensAndHeads(v);
    result = swapTokensAndHeads(result);
  }
  auto t = shape::attention(op->getLoc(), q, k, v, causal);
  if (failed(t))
    return failure();
  if (t->first != result || t->second != lse)
    return op->emitOpError("result and lse must be ")
           << (tokensFirst ? swapTokensAndHeads(t->first) : t->first) << " and "
           << t->second << ", got "
           << (tokensFirst ? swapTokensAndHeads(result) : result) << " and "
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
                        getScale().convertToDouble(), getTokensFirst());
}

LogicalResult AttentionGradOp::verify() {
  return checkAttention(*this, getQ().getType(), getK().getType(),
                        getV().getType(), getOut().getType(),
                        getLse().getType(), getCausal(),
                        getScale().convertToDouble(), getTokensFirst());
}
