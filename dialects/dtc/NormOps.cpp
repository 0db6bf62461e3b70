//===- NormOps.cpp - Batch normalization: verifiers, evaluation form ------===//
//
// batch_norm (training: the batch's statistics), its gradient, its
// evaluation form batch_norm_inference (given statistics) and
// update_running_stats, which folds a batch's statistics into the model's
// buffers. Each checks its per-channel types against dtc::shape::batchNorm,
// as the DSL frontend does.
//
//===----------------------------------------------------------------------===//
#include "dialects/dtc/DtcDialect.h"

using namespace mlir;
using namespace dtc;

namespace {
/// x is [N, C, ...] and `channels` (weight, bias, statistics) is [C].
LogicalResult checkChannels(Operation *op, Type x, Type channels, double eps) {
  auto c = shape::batchNorm(op->getLoc(), x, op->hasAttr("channels_last"));
  if (failed(c))
    return failure();
  if (*c != channels)
    return op->emitOpError("per-channel operands must be ")
           << *c << " for an input " << shape::str(x) << ", got " << channels;
  if (!(eps > 0.0))
    return op->emitOpError("eps must be > 0, got ") << eps;
  return success();
}

/// A dtc.buffer of the module named `name` of type `type`.
LogicalResult checkBuffer(Operation *op, FlatSymbolRefAttr name, Type type,
                          SymbolTableCollection &tables) {
  auto buffer = tables.lookupNearestSymbolFrom<BufferOp>(op, name.getAttr());
  if (!buffer)
    return op->emitOpError("'")
           << name.getValue() << "' is not a dtc.buffer of this module";
  if (buffer.getType() != type)
    return op->emitOpError("buffer '") << name.getValue() << "' must be "
                                       << type << ", got " << buffer.getType();
  return success();
}
} // namespace

LogicalResult LayerNormOp::verify() {
  auto x = getX().getType().getShape();
  auto w = getWeight().getType().getShape();
  auto m = getMean().getType().getShape();
  if (x.empty() || ShapedType::isDynamic(x.back()))
    return emitOpError("normalizes the last dimension of its input, which "
                       "needs one that is not the batch, got ")
           << getX().getType();
  if (w.size() != 1 || w[0] != x.back())
    return emitOpError("weight and bias must be [")
           << x.back() << "], the input's last dimension, got "
           << getWeight().getType();
  if (m != x.drop_back())
    return emitOpError("mean and rstd must be the input's shape without its "
                       "last dimension, got ")
           << getMean().getType();
  if (!(getEps().convertToDouble() > 0))
    return emitOpError("eps must be > 0");
  return success();
}

LogicalResult RmsNormOp::verify() {
  auto x = getX().getType().getShape();
  auto w = getWeight().getType().getShape();
  auto r = getRstd().getType().getShape();
  if (x.empty() || ShapedType::isDynamic(x.back()))
    return emitOpError("normalizes the last dimension of its input, which "
                       "needs one that is not the batch, got ")
           << getX().getType();
  if (w.size() != 1 || w[0] != x.back())
    return emitOpError("weight must be [")
           << x.back() << "], the input's last dimension, got "
           << getWeight().getType();
  if (r != x.drop_back())
    return emitOpError("rstd must be the input's shape without its last "
                       "dimension, got ")
           << getRstd().getType();
  if (!(getEps().convertToDouble() > 0))
    return emitOpError("eps must be > 0");
  return success();
}

LogicalResult BatchNormOp::verify() {
  return checkChannels(*this, getX().getType(), getWeight().getType(),
                       getEps().convertToDouble());
}
std::optional<shape::Window> BatchNormGradOp::maxPoolWindow() {
  auto k = getPoolKernel(), s = getPoolStride(), p = getPoolPadding();
  if (!k || !s || !p || k->size() != 2 || s->size() != 2 || p->size() != 2)
    return std::nullopt;
  shape::Window w{};
  w.kernel = {(*k)[0], (*k)[1]};
  w.stride = {(*s)[0], (*s)[1]};
  w.padding = {(*p)[0], (*p)[1]};
  w.dilation = {1, 1};
  return w;
}

LogicalResult BatchNormGradOp::verify() {
  if (getReluResult() && getReluResult().getType() != getX().getType())
    return emitOpError("relu_result must be of the input's type ")
           << getX().getType() << ", got " << getReluResult().getType();
  const int pooled = int(bool(getPoolKernel())) + int(bool(getPoolStride())) +
                     int(bool(getPoolPadding()));
  if (pooled == 0) {
    if (getDy().getType() != getX().getType())
      return emitOpError("dy must be of the input's type ")
             << getX().getType() << ", got " << getDy().getType();
  } else {
    // A fused max_pool2d_grad (dtc-fuse-max-pool-grad): dy is the gradient
    // of max_pool2d(relu_result).
    auto w = maxPoolWindow();
    if (pooled != 3 || !w)
      return emitOpError("pool_kernel, pool_stride and pool_padding go "
                         "together, 2 values (H, W) each");
    if (!getReluResult())
      return emitOpError("a fused max-pool gradient needs relu_result, the "
                         "pooling's input");
    if (getChannelsLast())
      return emitOpError("a fused max-pool gradient is NCHW or blocked, not "
                         "channels last");
    auto t = shape::pool2d(getLoc(), "max_pool2d", getX().getType(), *w);
    if (failed(t))
      return failure();
    if (!shape::sameOrBlocked(*t, getDy().getType()) ||
        shape::isBlocked(getX().getType()) !=
            shape::isBlocked(getDy().getType()))
      return emitOpError("dy: the pooling gives ")
             << shape::str(*t)
             << (shape::isBlocked(getX().getType()) ? " (blocked)" : "")
             << ", not " << shape::str(getDy().getType());
  }
  return checkChannels(*this, getX().getType(), getWeight().getType(),
                       getEps().convertToDouble());
}
LogicalResult BatchNormInferenceOp::verify() {
  return checkChannels(*this, getX().getType(), getWeight().getType(),
                       getEps().convertToDouble());
}

LogicalResult UpdateRunningStatsOp::verify() {
  double m = getMomentum().convertToDouble();
  if (!(m >= 0.0 && m <= 1.0))
    return emitOpError("momentum must be in [0, 1], got ") << m;
  return checkChannels(*this, getX().getType(), getMean().getType(), 1.0);
}

LogicalResult
UpdateRunningStatsOp::verifySymbolUses(SymbolTableCollection &tables) {
  Type stats = getMean().getType();
  if (failed(checkBuffer(*this, getRunningMeanAttr(), stats, tables)) ||
      failed(checkBuffer(*this, getRunningVarAttr(), stats, tables)))
    return failure();
  auto counter = RankedTensorType::get({}, IntegerType::get(getContext(), 64));
  return checkBuffer(*this, getNumBatchesTrackedAttr(), counter, tables);
}

// In evaluation: the running statistics in place of the batch's.
LogicalResult BatchNormOp::buildEvalForm(OpBuilder &b,
                                         SmallVectorImpl<Value> &results) {
  Value y = BatchNormInferenceOp::create(
      b, getLoc(), getX().getType(), getX(), getWeight(), getBias(),
      getRunningMean(), getRunningVar(), getEpsAttr(), getReluAttr(),
      getChannelsLastAttr());
  results.append({y, getRunningMean(), getRunningVar()});
  return success();
}

// Evaluation leaves the running statistics as they are.
LogicalResult UpdateRunningStatsOp::buildEvalForm(OpBuilder &,
                                                  SmallVectorImpl<Value> &) {
  return success();
}
