//===- ChannelsLast.cpp - NHWC activations for convolution chains --------===//
//
// Each NCHW conv2d, max_pool2d, avg_pool2d and 4-D batch_norm becomes its
// channels_last form between transpose(x, [0, 2, 3, 1]) and
// transpose(y, [0, 3, 1, 2]); a batch_norm's update_running_stats reads
// the same NHWC input. The canonicalizer that follows in the pipeline
// cancels each transpose back to NCHW that feeds a transpose to NHWC
// (TransposeOp's folder), so only the ends of a chain transpose. The pass
// rewrites the forward graph: dtc-autodiff then builds channels-last
// gradients (each gradient builder copies the attribute).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

namespace dtc {
#define GEN_PASS_DEF_CHANNELSLAST
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
constexpr int64_t kToNhwc[] = {0, 2, 3, 1};
constexpr int64_t kToNchw[] = {0, 3, 1, 2};

Value transpose(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> perm) {
  auto t = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(t.getDimSize(p));
  return TransposeOp::create(b, loc,
                             RankedTensorType::get(shape, t.getElementType()),
                             x, b.getDenseI64ArrayAttr(perm));
}

RankedTensorType nhwc(Type nchw) {
  auto t = cast<RankedTensorType>(nchw);
  return RankedTensorType::get(shape::nchwToNhwc(t.getShape()),
                               t.getElementType());
}

/// op (x its first operand, NCHW result 0) as its channels_last clone on
/// the transposed x, its first result transposed back; returns the clone.
Operation *rewrite(Operation *op) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  Value x = transpose(b, loc, op->getOperand(0), kToNhwc);
  Operation *clone = b.clone(*op);
  clone->setOperand(0, x);
  clone->getResult(0).setType(nhwc(op->getResult(0).getType()));
  clone->setAttr("channels_last", b.getUnitAttr());
  Value y = transpose(b, loc, clone->getResult(0), kToNchw);
  op->getResult(0).replaceAllUsesWith(y);
  for (unsigned i = 1; i < op->getNumResults(); ++i)
    op->getResult(i).replaceAllUsesWith(clone->getResult(i));
  op->erase();
  return clone;
}

bool isNchw(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank() == 4;
}

struct ChannelsLastPass : public dtc::impl::ChannelsLastBase<ChannelsLastPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (op->hasAttr("channels_last"))
        return;
      if (isa<Conv2dOp, MaxPool2dOp, AvgPool2dOp>(op) ||
          (isa<BatchNormOp>(op) && isNchw(op->getOperand(0))))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      // The statistics' updates read the input the statistics are of.
      SmallVector<UpdateRunningStatsOp> updates;
      if (auto bn = dyn_cast<BatchNormOp>(op))
        updates = runningStatsUpdates(bn);
      Operation *clone = rewrite(op);
      for (UpdateRunningStatsOp u : updates) {
        u.getXMutable().assign(clone->getOperand(0));
        u.setChannelsLast(true);
      }
    }
  }
};
} // namespace
