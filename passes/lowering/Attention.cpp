//===- Attention.cpp - Scaled dot-product attention -----------------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// [heads, Tq, Tk, D, Dv] of q [..., Tq, D], k [..., Tk, D], v [..., Tk, Dv]:
/// every leading index (batch, heads) one head of the kernel.
std::array<Value, 5> headsView(Lowering &l, Type q, Type k, Type v) {
  auto qs = cast<RankedTensorType>(q).getShape();
  auto ks = cast<RankedTensorType>(k).getShape();
  auto vs = cast<RankedTensorType>(v).getShape();
  const size_t r = qs.size();
  return {l.size(qs, 0, r - 2), l.i64(qs[r - 2]), l.i64(ks[r - 2]),
          l.i64(qs[r - 1]), l.i64(vs[r - 1])};
}
} // namespace

void dtc::lowering::populateAttentionLowerings(LoweringTable &t) {
  t.add<AttentionOp>([](AttentionOp op, Lowering &l) {
    auto [heads, tq, tk, d, dv] = headsView(
        l, op.getQ().getType(), op.getK().getType(), op.getV().getType());
    dtcrt::AttentionOp::create(
        l.b, l.loc, l.ptr(op.getQ()), l.ptr(op.getK()), l.ptr(op.getV()),
        l.resultBuffer(op, 0), l.resultBuffer(op, 1), heads, tq, tk, d, dv,
        l.i1(op.getCausal()), l.f32(float(op.getScale().convertToDouble())));
    return success();
  });
  t.add<AttentionGradOp>([](AttentionGradOp op, Lowering &l) {
    auto [heads, tq, tk, d, dv] = headsView(
        l, op.getQ().getType(), op.getK().getType(), op.getV().getType());
    dtcrt::AttentionGradOp::create(
        l.b, l.loc, l.ptr(op.getQ()), l.ptr(op.getK()), l.ptr(op.getV()),
        l.ptr(op.getOut()), l.ptr(op.getLse()), l.ptr(op.getDy()),
        l.resultBuffer(op, 0), l.resultBuffer(op, 1), l.resultBuffer(op, 2),
        heads, tq, tk, d, dv, l.i1(op.getCausal()),
        l.f32(float(op.getScale().convertToDouble())));
    return success();
  });
}
