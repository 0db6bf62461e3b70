//===- WindowOps.cpp - Convolution and pooling ops: verifiers, scratch ----===//
//
// conv2d, max_pool2d and avg_pool2d with their gradients. Each checks its
// types against dtc::shape::conv2d / pool2d, the shape inference the DSL
// frontend uses, so that an op the frontend builds always verifies.
//
//===----------------------------------------------------------------------===//
#include "dialects/dtc/DtcDialect.h"

using namespace mlir;
using namespace dtc;

namespace {
/// A pair attribute (stride, padding, ...) as the Window wants it; false
/// after an error when it is not a pair.
bool pair(Operation *op, StringRef name, ArrayRef<int64_t> values,
          std::array<int64_t, 2> &out) {
  if (values.size() != 2) {
    op->emitOpError() << "'" << name << "' needs 2 values (H, W), got "
                      << values.size();
    return false;
  }
  out = {values[0], values[1]};
  return true;
}

/// A pair attribute's values ({0, 0} if not a pair: the verifier says so).
std::array<int64_t, 2> two(ArrayRef<int64_t> v) {
  return v.size() == 2 ? std::array<int64_t, 2>{v[0], v[1]}
                       : std::array<int64_t, 2>{0, 0};
}

template <typename ConvLike> shape::Window convWindow(ConvLike op) {
  shape::Window w{};
  w.kernel = {1, 1}; // the weight's
  w.stride = two(op.getStride());
  w.padding = two(op.getPadding());
  w.dilation = two(op.getDilation());
  w.channelsLast = op.getChannelsLast();
  return w;
}

template <typename PoolLike> shape::Window poolWindow(PoolLike op) {
  shape::Window w{};
  w.kernel = two(op.getKernel());
  w.stride = two(op.getStride());
  w.padding = two(op.getPadding());
  w.dilation = {1, 1};
  w.channelsLast = op.getChannelsLast();
  return w;
}

template <typename ConvLike> LogicalResult checkConvPairs(ConvLike op) {
  std::array<int64_t, 2> v;
  if (!pair(op, "stride", op.getStride(), v) ||
      !pair(op, "padding", op.getPadding(), v) ||
      !pair(op, "dilation", op.getDilation(), v))
    return failure();
  return success();
}

template <typename PoolLike> LogicalResult checkPoolPairs(PoolLike op) {
  std::array<int64_t, 2> v;
  if (!pair(op, "kernel", op.getKernel(), v) ||
      !pair(op, "stride", op.getStride(), v) ||
      !pair(op, "padding", op.getPadding(), v))
    return failure();
  return success();
}

/// Checks that conv2d(x, weight) has type `y`.
LogicalResult checkConv(Operation *op, Type x, Type weight, Type y,
                        const shape::Window &w, int64_t groups,
                        StringRef what) {
  auto t = shape::conv2d(op->getLoc(), x, weight, w, groups);
  if (failed(t))
    return failure();
  if (!shape::sameOrBlocked(*t, y))
    return op->emitOpError() << what << ": the convolution gives "
                             << shape::str(*t) << ", not " << shape::str(y);
  return success();
}

/// im2col columns of one sample: C kH kW x Ho Wo floats (x and y in
/// any layout).
int64_t columnBytes(RankedTensorType x, RankedTensorType weight,
                    RankedTensorType y, bool channelsLast) {
  auto nchw = [&](RankedTensorType t) {
    if (shape::isBlocked(t))
      return shape::blockedToNchw(t.getShape());
    return channelsLast ? shape::nhwcToNchw(t.getShape())
                        : SmallVector<int64_t>(t.getShape());
  };
  auto xs = nchw(x), ys = nchw(y);
  return xs[1] * weight.getDimSize(2) * weight.getDimSize(3) * ys[2] * ys[3] *
         int64_t(sizeof(float));
}
} // namespace

shape::Window Conv2dOp::window() { return convWindow(*this); }
shape::Window Conv2dGradInputOp::window() { return convWindow(*this); }
shape::Window Conv2dGradWeightOp::window() { return convWindow(*this); }
shape::Window MaxPool2dOp::window() { return poolWindow(*this); }
shape::Window MaxPool2dGradOp::window() { return poolWindow(*this); }
shape::Window AvgPool2dOp::window() { return poolWindow(*this); }
shape::Window AvgPool2dGradOp::window() { return poolWindow(*this); }

/// A convolution's bias (or its gradient) is [O], O the weight's first
/// dimension.
static LogicalResult checkBias(Operation *op, Value bias, Type weight,
                               StringRef what) {
  if (!bias)
    return success();
  auto o = cast<RankedTensorType>(weight).getDimSize(0);
  auto t = RankedTensorType::get({o}, Float32Type::get(op->getContext()));
  if (bias.getType() != t)
    return op->emitOpError() << what << " must be " << shape::str(t) << ", got "
                             << shape::str(bias.getType());
  return success();
}

LogicalResult Conv2dOp::verify() {
  if (failed(checkConvPairs(*this)) ||
      failed(checkBias(*this, getBias(), getWeight().getType(), "the bias")))
    return failure();
  return checkConv(*this, getX().getType(), getWeight().getType(), getType(),
                   window(), getGroups(), "result");
}
LogicalResult Conv2dGradInputOp::verify() {
  if (failed(checkConvPairs(*this)))
    return failure();
  return checkConv(*this, getType(), getWeight().getType(), getDy().getType(),
                   window(), getGroups(), "dy");
}
LogicalResult Conv2dGradWeightOp::verify() {
  if (failed(checkConvPairs(*this)))
    return failure();
  if (shape::isBatched(getResult().getType()))
    return emitOpError("the weight gradient has a fixed shape");
  if (failed(checkBias(*this, getBiasGrad(), getResult().getType(),
                       "the bias gradient")))
    return failure();
  return checkConv(*this, getX().getType(), getResult().getType(),
                   getDy().getType(), window(), getGroups(), "dy");
}

int64_t Conv2dOp::getScratchBytes() {
  return columnBytes(getX().getType(), getWeight().getType(), getType(),
                     getChannelsLast());
}
int64_t Conv2dGradInputOp::getScratchBytes() {
  return columnBytes(getType(), getWeight().getType(), getDy().getType(),
                     getChannelsLast());
}
int64_t Conv2dGradWeightOp::getScratchBytes() {
  return columnBytes(getX().getType(), getResult().getType(), getDy().getType(),
                     getChannelsLast());
}

/// Checks that pool2d(x) has type `y`.
static LogicalResult checkPool(Operation *op, StringRef what, Type x, Type y,
                               const shape::Window &w, StringRef operand) {
  auto t = shape::pool2d(op->getLoc(), what, x, w);
  if (failed(t))
    return failure();
  if (!shape::sameOrBlocked(*t, y))
    return op->emitOpError() << operand << ": the pooling gives "
                             << shape::str(*t) << ", not " << shape::str(y);
  if (shape::isBlocked(x) != shape::isBlocked(y))
    return op->emitOpError()
           << operand << ": blocked on both sides of the pooling, or neither";
  return success();
}

LogicalResult MaxPool2dOp::verify() {
  if (failed(checkPoolPairs(*this)))
    return failure();
  return checkPool(*this, "max_pool2d", getX().getType(), getType(), window(),
                   "result");
}
LogicalResult MaxPool2dGradOp::verify() {
  if (failed(checkPoolPairs(*this)))
    return failure();
  if (getType() != getX().getType())
    return emitOpError("returns the input's type");
  return checkPool(*this, "max_pool2d", getX().getType(), getDy().getType(),
                   window(), "dy");
}
LogicalResult AvgPool2dOp::verify() {
  if (failed(checkPoolPairs(*this)))
    return failure();
  return checkPool(*this, "avg_pool2d", getX().getType(), getType(), window(),
                   "result");
}
LogicalResult AvgPool2dGradOp::verify() {
  if (failed(checkPoolPairs(*this)))
    return failure();
  return checkPool(*this, "avg_pool2d", getType(), getDy().getType(), window(),
                   "dy");
}
