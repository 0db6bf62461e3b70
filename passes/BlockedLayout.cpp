//===- BlockedLayout.cpp - nChw16c activations for convolution chains ----===//
//
// oneDNN's AVX-512 convolutions pick the blocked layout nChw16c for their
// activations; NCHW tensors are reordered into and out of it around every
// convolution. This pass plans it: each NCHW conv2d (groups 1), max_pool2d,
// avg_pool2d and 4-D batch_norm holds its activations blocked,
// [N, C / 16, H, W, 16], wherever their channels are a multiple of 16 (a
// first convolution of an image's 1 or 3 channels reads NCHW and writes
// blocked), between the conversions
//   to:   transpose(reshape(x : [N, C / 16, 16, H, W]), [0, 1, 3, 4, 2])
//   from: reshape(transpose(y, [0, 1, 4, 2, 3]) : [N, C / 16, 16, H, W])
// which the canonicalizer that follows cancels between two such ops (a
// reshape of a reshape, then a transpose of its inverse), so a chain conv,
// batch norm, pool, conv, ... converts once at each end. A batch_norm's
// update_running_stats reads the blocked input. The weights keep torch's
// [O, C / groups, kH, kW]. On the forward graph, before dtc-autodiff, whose
// gradients take the types of what they differentiate.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

namespace dtc {
#define GEN_PASS_DEF_BLOCKEDLAYOUT
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
constexpr int64_t kToBlocked[] = {0, 1, 3, 4, 2};
constexpr int64_t kFromBlocked[] = {0, 1, 4, 2, 3};

RankedTensorType f32(ArrayRef<int64_t> shape, Type like) {
  return RankedTensorType::get(shape,
                               cast<RankedTensorType>(like).getElementType());
}
/// [N, C, H, W] -> [N, C / 16, 16, H, W], the split before the transpose.
SmallVector<int64_t> split(ArrayRef<int64_t> s) {
  return {s[0], s[1] / shape::kBlock, shape::kBlock, s[2], s[3]};
}

Value toBlocked(OpBuilder &b, Location loc, Value x) {
  auto s = cast<RankedTensorType>(x.getType()).getShape();
  Value r = ReshapeOp::create(b, loc, f32(split(s), x.getType()), x);
  return TransposeOp::create(b, loc, f32(shape::nchwToBlocked(s), x.getType()),
                             r, b.getDenseI64ArrayAttr(kToBlocked));
}
Value fromBlocked(OpBuilder &b, Location loc, Value y) {
  auto nchw =
      shape::blockedToNchw(cast<RankedTensorType>(y.getType()).getShape());
  Value t = TransposeOp::create(b, loc, f32(split(nchw), y.getType()), y,
                                b.getDenseI64ArrayAttr(kFromBlocked));
  return ReshapeOp::create(b, loc, f32(nchw, y.getType()), t);
}

/// An NCHW activation whose channels fill whole blocks.
bool blockable(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() == 4 && !ShapedType::isDynamic(t.getDimSize(1)) &&
         t.getDimSize(1) % shape::kBlock == 0;
}

/// op (x its first operand, its activation result 0) as its clone with x
/// blocked if `in` and the result blocked if `out`, converted back for the
/// op's users; returns the clone.
Operation *rewrite(Operation *op, bool in, bool out) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  Value x = in ? toBlocked(b, loc, op->getOperand(0)) : op->getOperand(0);
  Operation *clone = b.clone(*op);
  clone->setOperand(0, x);
  Value y = clone->getResult(0);
  if (out) {
    y.setType(f32(
        shape::nchwToBlocked(cast<RankedTensorType>(y.getType()).getShape()),
        y.getType()));
    y = fromBlocked(b, loc, y);
  }
  op->getResult(0).replaceAllUsesWith(y);
  for (unsigned i = 1; i < op->getNumResults(); ++i)
    op->getResult(i).replaceAllUsesWith(clone->getResult(i));
  op->erase();
  return clone;
}

struct BlockedLayoutPass
    : public dtc::impl::BlockedLayoutBase<BlockedLayoutPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (op->hasAttr("channels_last") || op->getNumOperands() == 0 ||
          cast<RankedTensorType>(op->getOperand(0).getType()).getRank() != 4)
        return;
      if (auto conv = dyn_cast<Conv2dOp>(op)) {
        if (conv.getGroups() == 1 &&
            (blockable(conv.getX()) || blockable(conv.getResult())))
          ops.push_back(op);
      } else if (isa<MaxPool2dOp, AvgPool2dOp, BatchNormOp>(op) &&
                 blockable(op->getOperand(0))) {
        ops.push_back(op);
      }
    });
    for (Operation *op : ops) {
      // The statistics' updates read the input the statistics are of.
      SmallVector<UpdateRunningStatsOp> updates;
      if (auto bn = dyn_cast<BatchNormOp>(op))
        updates = runningStatsUpdates(bn);
      const bool in = blockable(op->getOperand(0));
      const bool out = blockable(op->getResult(0));
      Operation *clone = rewrite(op, in, out);
      for (UpdateRunningStatsOp u : updates)
        u.getXMutable().assign(clone->getOperand(0));
    }
  }
};
} // namespace
