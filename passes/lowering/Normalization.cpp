//===- Normalization.cpp - batch_norm, its gradient and its buffers -------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// [n, channels, inner, lanes] of a batch normalization's input [N, C, ...]
/// (lanes 1); of a channels-last one [N, H, W, C], [N H W, C, 1, 1]; of a
/// blocked one [N, C / 16, H, W, 16] (dtc-blocked-layout), [N, C, H W, 16].
std::array<Value, 4> channelView(Lowering &l, Type x, bool channelsLast) {
  auto s = cast<RankedTensorType>(x).getShape();
  if (channelsLast)
    return {l.size(s, 0, s.size() - 1), l.i64(s.back()), l.i64(1), l.i64(1)};
  if (shape::isBlocked(x))
    return {l.size(s, 0, 1), l.i64(s[1] * s[4]), l.size(s, 2, 4), l.i64(s[4])};
  Value n = l.size(s, 0, 1);
  Value c = l.i64(s[1]);
  Value inner = l.size(s, 2, s.size());
  return {n, c, inner, l.i64(1)};
}
} // namespace

void dtc::lowering::populateNormalizationLowerings(LoweringTable &t) {
  t.add<BatchNormOp>([](BatchNormOp op, Lowering &l) {
    Value y = l.resultBuffer(op, 0);
    Value mean = l.resultBuffer(op, 1);
    Value var = l.resultBuffer(op, 2);
    auto [n, c, inner, lanes] =
        channelView(l, op.getX().getType(), op.getChannelsLast());
    Value eps = l.f32(float(op.getEps().convertToDouble()));
    Value relu = l.i1(op.getRelu());
    dtcrt::BatchNormOp::create(l.b, l.loc, l.ptr(op.getX()),
                               l.ptr(op.getWeight()), l.ptr(op.getBias()), y,
                               mean, var, n, c, inner, eps, relu, lanes);
    return success();
  });
  t.add<BatchNormGradOp>([](BatchNormGradOp op, Lowering &l) {
    Value dx = l.resultBuffer(op, 0);
    Value dw = l.resultBuffer(op, 1);
    Value db = l.resultBuffer(op, 2);
    auto [n, c, inner, lanes] =
        channelView(l, op.getX().getType(), op.getChannelsLast());
    Value eps = l.f32(float(op.getEps().convertToDouble()));
    Value activated = op.getReluResult() ? l.ptr(op.getReluResult()) : l.null();
    if (auto pool = op.maxPoolWindow()) { // dtc-fuse-max-pool-grad's
      Value window =
          l.window2d(op.getX().getType(), op.getDy().getType(), *pool, 1);
      dtcrt::BatchNormGradMaxPoolOp::create(
          l.b, l.loc, l.ptr(op.getX()), l.ptr(op.getDy()), l.ptr(op.getMean()),
          l.ptr(op.getVar()), l.ptr(op.getWeight()), activated, dx, dw, db, n,
          c, inner, eps, lanes, window);
      return success();
    }
    dtcrt::BatchNormGradOp::create(
        l.b, l.loc, l.ptr(op.getX()), l.ptr(op.getDy()), l.ptr(op.getMean()),
        l.ptr(op.getVar()), l.ptr(op.getWeight()), activated, dx, dw, db, n, c,
        inner, eps, lanes);
    return success();
  });
  t.add<BatchNormInferenceOp>([](BatchNormInferenceOp op, Lowering &l) {
    Value y = l.resultBuffer(op);
    auto [n, c, inner, lanes] =
        channelView(l, op.getX().getType(), op.getChannelsLast());
    Value eps = l.f32(float(op.getEps().convertToDouble()));
    Value relu = l.i1(op.getRelu());
    dtcrt::BatchNormInferenceOp::create(
        l.b, l.loc, l.ptr(op.getX()), l.ptr(op.getWeight()),
        l.ptr(op.getBias()), l.ptr(op.getMean()), l.ptr(op.getVar()), y, n, c,
        inner, eps, relu, lanes);
    return success();
  });
  // Layer norm: x [..., D] as [rows, D].
  t.add<LayerNormOp>([](LayerNormOp op, Lowering &l) {
    auto s = op.getX().getType().getShape();
    Value rows = l.size(s, 0, s.size() - 1), d = l.i64(s.back());
    Value eps = l.f32(float(op.getEps().convertToDouble()));
    // One buffer per statement: their order must not depend on the
    // compiler's order of evaluating arguments (GCC's and clang's differ).
    Value y = l.resultBuffer(op, 0);
    Value mean = l.resultBuffer(op, 1);
    Value rstd = l.resultBuffer(op, 2);
    dtcrt::LayerNormOp::create(l.b, l.loc, l.ptr(op.getX()),
                               l.ptr(op.getWeight()), l.ptr(op.getBias()), y,
                               mean, rstd, rows, d, eps);
    return success();
  });
  t.add<LayerNormGradOp>([](LayerNormGradOp op, Lowering &l) {
    auto s = op.getX().getType().getShape();
    Value rows = l.size(s, 0, s.size() - 1), d = l.i64(s.back());
    Value dx = l.resultBuffer(op, 0);
    Value dw = l.resultBuffer(op, 1);
    Value db = l.resultBuffer(op, 2);
    dtcrt::LayerNormGradOp::create(
        l.b, l.loc, l.ptr(op.getX()), l.ptr(op.getDy()), l.ptr(op.getMean()),
        l.ptr(op.getRstd()), l.ptr(op.getWeight()), dx, dw, db, rows, d);
    return success();
  });
  // RMS norm: x [..., D] as [rows, D].
  t.add<RmsNormOp>([](RmsNormOp op, Lowering &l) {
    auto s = op.getX().getType().getShape();
    Value rows = l.size(s, 0, s.size() - 1), d = l.i64(s.back());
    Value eps = l.f32(float(op.getEps().convertToDouble()));
    Value y = l.resultBuffer(op, 0);
    Value rstd = l.resultBuffer(op, 1);
    dtcrt::RmsNormOp::create(l.b, l.loc, l.ptr(op.getX()),
                             l.ptr(op.getWeight()), y, rstd, rows, d, eps);
    return success();
  });
  t.add<RmsNormGradOp>([](RmsNormGradOp op, Lowering &l) {
    auto s = op.getX().getType().getShape();
    Value rows = l.size(s, 0, s.size() - 1), d = l.i64(s.back());
    Value dx = l.resultBuffer(op, 0);
    Value dw = l.resultBuffer(op, 1);
    dtcrt::RmsNormGradOp::create(l.b, l.loc, l.ptr(op.getX()),
                                 l.ptr(op.getDy()), l.ptr(op.getRstd()),
                                 l.ptr(op.getWeight()), dx, dw, rows, d);
    return success();
  });
  // The buffers are updated where they live, in the persistent block.
  t.add<UpdateRunningStatsOp>([](UpdateRunningStatsOp op, Lowering &l) {
    Value rm = l.persistent(l.placement(op.getRunningMean()).getOffset());
    Value rv = l.persistent(l.placement(op.getRunningVar()).getOffset());
    Value counter = dtcrt::BufferOp::create(
        l.b, l.loc, dtcrt::PtrType::get(l.b.getContext(), l.b.getI64Type()),
        dtcrt::Space::Persistent,
        l.placement(op.getNumBatchesTracked()).getOffset());
    auto s = op.getX().getType().getShape();
    const bool last = op.getChannelsLast();
    const bool blocked = shape::isBlocked(op.getX().getType());
    Value c = l.i64(last ? s.back() : blocked ? s[1] * s[4] : s[1]);
    // The elements of a channel in this rank's batch.
    SmallVector<int64_t> perChannel{s[0]};
    perChannel.append(s.begin() + (last ? 1 : 2),
                      s.end() - (last || blocked ? 1 : 0));
    Value count = l.size(perChannel, 0, perChannel.size());
    Value momentum = l.f32(float(op.getMomentum().convertToDouble()));
    dtcrt::UpdateRunningStatsOp::create(l.b, l.loc, l.ptr(op.getMean()),
                                        l.ptr(op.getVar()), rm, rv, counter, c,
                                        count, momentum);
    return success();
  });
}
