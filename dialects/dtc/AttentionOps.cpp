//===- AttentionOps.cpp - Scaled dot-product attention: verifiers --------===//
//
// attention and its gradient check q, k, v and their results against
// dtc::shape::attention, as the DSL frontend does (tokens-first operands
// as the head-major ones they stand for), and the scale; the qkv-packed
// forms check their slices ([..., T, 3, H, D] without the 3) the same way.
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
/// The q of a packed qkv [..., T, 3, H, D]: [..., T, H, D]; null (with the
/// error emitted) where qkv is not of that form.
RankedTensorType packedSlice(Operation *op, Type qkv) {
  auto t = cast<RankedTensorType>(qkv);
  const int64_t r = t.getRank();
  if (r < 4 || t.getDimSize(r - 3) != 3) {
    op->emitOpError("qkv must be [..., T, 3, H, D] (q, k and v packed), got ")
        << qkv;
    return {};
  }
  SmallVector<int64_t> shape(t.getShape());
  shape.erase(shape.begin() + (r - 3));
  return RankedTensorType::get(shape, t.getElementType());
}
} // namespace

LogicalResult AttentionQkvPackedOp::verify() {
  RankedTensorType q = packedSlice(*this, getQkv().getType());
  if (!q)
    return failure();
  return checkAttention(*this, q, q, q, getResult().getType(),
                        getLse().getType(), getCausal(),
                        getScale().convertToDouble(), /*tokensFirst=*/true);
}

LogicalResult AttentionQkvPackedGradOp::verify() {
  RankedTensorType q = packedSlice(*this, getQkv().getType());
  if (!q)
    return failure();
  return checkAttention(*this, q, q, q, getOut().getType(), getLse().getType(),
                        getCausal(), getScale().convertToDouble(),
                        /*tokensFirst=*/true);
}

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
