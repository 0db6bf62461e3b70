//===- Attention.cpp - Scaled dot-product attention -----------------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// The kernels' view of the heads: [heads, group, qk_rows, v_rows, Tq, Tk,
/// D, Dv].
using Heads = std::array<Value, 8>;

/// The heads of q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv]: every
/// leading index (batch, heads) one head of the kernel, group 1, rows D and
/// Dv apart. Tokens-first (q [..., Tq, H, D]), the heads are the leading
/// indices times H, the H of a token row interleaved: group H, rows H D and
/// H Dv apart.
Heads headsView(Lowering &l, Type q, Type k, Type v, bool tokensFirst) {
  auto qs = cast<RankedTensorType>(q).getShape();
  auto ks = cast<RankedTensorType>(k).getShape();
  auto vs = cast<RankedTensorType>(v).getShape();
  const size_t r = qs.size();
  if (tokensFirst) {
    SmallVector<int64_t> heads(qs.take_front(r - 3));
    heads.push_back(qs[r - 2]);
    const int64_t h = qs[r - 2];
    return {l.size(heads, 0, heads.size()),
            l.i64(h),
            l.i64(h * qs[r - 1]),
            l.i64(h * vs[r - 1]),
            l.i64(qs[r - 3]),
            l.i64(ks[r - 3]),
            l.i64(qs[r - 1]),
            l.i64(vs[r - 1])};
  }
  return {l.size(qs, 0, r - 2), l.i64(1),         l.i64(qs[r - 1]),
          l.i64(vs[r - 1]),     l.i64(qs[r - 2]), l.i64(ks[r - 2]),
          l.i64(qs[r - 1]),     l.i64(vs[r - 1])};
}

/// The heads of a packed qkv [..., T, 3, H, D]: tokens-first, the rows of
/// each slice 3 H D floats apart.
Heads packedHeadsView(Lowering &l, Type qkv) {
  auto s = cast<RankedTensorType>(qkv).getShape();
  const size_t r = s.size();
  SmallVector<int64_t> heads(s.take_front(r - 4));
  heads.push_back(s[r - 2]);
  const int64_t rows = 3 * s[r - 2] * s[r - 1];
  return {l.size(heads, 0, heads.size()),
          l.i64(s[r - 2]),
          l.i64(rows),
          l.i64(rows),
          l.i64(s[r - 4]),
          l.i64(s[r - 4]),
          l.i64(s[r - 1]),
          l.i64(s[r - 1])};
}

/// Pointers to the q, k and v slices of a packed [..., T, 3, H, D] buffer.
std::array<Value, 3> slices(Lowering &l, Value packed, Type qkv) {
  auto s = cast<RankedTensorType>(qkv).getShape();
  const int64_t slice = s[s.size() - 2] * s[s.size() - 1];
  Type ptr = packed.getType();
  Value k = dtcrt::OffsetOp::create(l.b, l.loc, ptr, packed, slice);
  Value v = dtcrt::OffsetOp::create(l.b, l.loc, ptr, packed, 2 * slice);
  return {packed, k, v};
}

void lowerAttention(Lowering &l, Operation *op, Value q, Value k, Value v,
                    const Heads &h, bool causal, APFloat scale) {
  auto [heads, group, qkRows, vRows, tq, tk, d, dv] = h;
  Value out = l.resultBuffer(op, 0);
  Value lse = l.resultBuffer(op, 1);
  dtcrt::AttentionOp::create(l.b, l.loc, q, k, v, out, lse, heads, group,
                             qkRows, vRows, tq, tk, d, dv, l.i1(causal),
                             l.f32(float(scale.convertToDouble())));
}

void lowerAttentionGrad(Lowering &l, std::array<Value, 3> qkv, Value out,
                        Value lse, Value dy, std::array<Value, 3> grads,
                        const Heads &h, bool causal, APFloat scale) {
  auto [heads, group, qkRows, vRows, tq, tk, d, dv] = h;
  dtcrt::AttentionGradOp::create(l.b, l.loc, qkv[0], qkv[1], qkv[2], out, lse,
                                 dy, grads[0], grads[1], grads[2], heads, group,
                                 qkRows, vRows, tq, tk, d, dv, l.i1(causal),
                                 l.f32(float(scale.convertToDouble())));
}
} // namespace

void dtc::lowering::populateAttentionLowerings(LoweringTable &t) {
  // (One op per statement: the order of the IR never depends on the
  // compiler's order of evaluating arguments.)
  t.add<AttentionOp>([](AttentionOp op, Lowering &l) {
    Heads h = headsView(l, op.getQ().getType(), op.getK().getType(),
                        op.getV().getType(), op.getTokensFirst());
    Value q = l.ptr(op.getQ()), k = l.ptr(op.getK()), v = l.ptr(op.getV());
    lowerAttention(l, op, q, k, v, h, op.getCausal(), op.getScale());
    return success();
  });
  t.add<AttentionQkvPackedOp>([](AttentionQkvPackedOp op, Lowering &l) {
    Heads h = packedHeadsView(l, op.getQkv().getType());
    auto [q, k, v] = slices(l, l.ptr(op.getQkv()), op.getQkv().getType());
    lowerAttention(l, op, q, k, v, h, op.getCausal(), op.getScale());
    return success();
  });
  t.add<AttentionGradOp>([](AttentionGradOp op, Lowering &l) {
    Heads h = headsView(l, op.getQ().getType(), op.getK().getType(),
                        op.getV().getType(), op.getTokensFirst());
    Value q = l.ptr(op.getQ()), k = l.ptr(op.getK()), v = l.ptr(op.getV());
    Value out = l.ptr(op.getOut()), lse = l.ptr(op.getLse());
    Value dy = l.ptr(op.getDy());
    Value dq = l.resultBuffer(op, 0);
    Value dk = l.resultBuffer(op, 1);
    Value dv = l.resultBuffer(op, 2);
    lowerAttentionGrad(l, {q, k, v}, out, lse, dy, {dq, dk, dv}, h,
                       op.getCausal(), op.getScale());
    return success();
  });
  t.add<AttentionQkvPackedGradOp>([](AttentionQkvPackedGradOp op, Lowering &l) {
    Type type = op.getQkv().getType();
    Heads h = packedHeadsView(l, type);
    auto qkv = slices(l, l.ptr(op.getQkv()), type);
    Value out = l.ptr(op.getOut()), lse = l.ptr(op.getLse());
    Value dy = l.ptr(op.getDy());
    auto grads = slices(l, l.resultBuffer(op, 0), type);
    lowerAttentionGrad(l, qkv, out, lse, dy, grads, h, op.getCausal(),
                       op.getScale());
    return success();
  });
}
