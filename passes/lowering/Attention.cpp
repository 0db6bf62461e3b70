//===- Attention.cpp - Scaled dot-product attention -----------------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// [heads, group, Tq, Tk, D, Dv] of q [..., Tq, D], k [..., Tk, D], v [...,
/// Tk, Dv]: every leading index (batch, heads) one head of the kernel,
/// group 1. Tokens-first (q [..., Tq, H, D]), the heads are the leading
/// indices times H, the H of a token row interleaved: group H.
std::array<Value, 6> headsView(Lowering &l, Type q, Type k, Type v,
                               bool tokensFirst) {
  auto qs = cast<RankedTensorType>(q).getShape();
  auto ks = cast<RankedTensorType>(k).getShape();
  auto vs = cast<RankedTensorType>(v).getShape();
  const size_t r = qs.size();
  if (tokensFirst) {
    SmallVector<int64_t> heads(qs.take_front(r - 3));
    heads.push_back(qs[r - 2]);
    return {l.size(heads, 0, heads.size()),
            l.i64(qs[r - 2]),
            l.i64(qs[r - 3]),
            l.i64(ks[r - 3]),
            l.i64(qs[r - 1]),
            l.i64(vs[r - 1])};
  }
  return {l.size(qs, 0, r - 2), l.i64(1),         l.i64(qs[r - 2]),
          l.i64(ks[r - 2]),     l.i64(qs[r - 1]), l.i64(vs[r - 1])};
}
} // namespace

void dtc::lowering::populateAttentionLowerings(LoweringTable &t) {
  t.add<AttentionOp>([](AttentionOp op, Lowering &l) {
    auto [heads, group, tq, tk, d, dv] =
        headsView(l, op.getQ().getType(), op.getK().getType(),
                  op.getV().getType(), op.getTokensFirst());
    // (One op per statement: the order of the IR never depends on the
    // compiler's order of evaluating arguments.)
    Value q = l.ptr(op.getQ()), k = l.ptr(op.getK()), v = l.ptr(op.getV());
    Value out = l.resultBuffer(op, 0);
    Value lse = l.resultBuffer(op, 1);
    Value causal = l.i1(op.getCausal());
    Value scale = l.f32(float(op.getScale().convertToDouble()));
    dtcrt::AttentionOp::create(l.b, l.loc, q, k, v, out, lse, heads, group, tq,
                               tk, d, dv, causal, scale);
    return success();
  });
  t.add<AttentionGradOp>([](AttentionGradOp op, Lowering &l) {
    auto [heads, group, tq, tk, d, dv] =
        headsView(l, op.getQ().getType(), op.getK().getType(),
                  op.getV().getType(), op.getTokensFirst());
    Value q = l.ptr(op.getQ()), k = l.ptr(op.getK()), v = l.ptr(op.getV());
    Value out = l.ptr(op.getOut()), lse = l.ptr(op.getLse());
    Value dy = l.ptr(op.getDy());
    Value dq = l.resultBuffer(op, 0);
    Value dk = l.resultBuffer(op, 1);
    Value dv2 = l.resultBuffer(op, 2);
    Value causal = l.i1(op.getCausal());
    Value scale = l.f32(float(op.getScale().convertToDouble()));
    dtcrt::AttentionGradOp::create(l.b, l.loc, q, k, v, out, lse, dy, dq, dk,
                                   dv2, heads, group, tq, tk, d, dv, causal,
                                   scale);
    return success();
  });
}
