//===- Elementwise.cpp - Fused elementwise kernels ------------------------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// How the kernel reads `input` at each element of `out`: at the linear
/// index (empty), or through one stride per dimension of `out` (0 where the
/// input is broadcast). The batch dimension, when present, is the first, so
/// no stride involves B; a 0-d input has all strides 0.
SmallVector<int64_t> strides(RankedTensorType input, RankedTensorType out) {
  if (input == out)
    return {};
  size_t rank = out.getRank();
  SmallVector<int64_t> s(rank, 0);
  auto in = input.getShape();
  int64_t stride = 1;
  for (int64_t j = in.size() - 1; j >= 0; --j) {
    size_t k = j + (rank - in.size());
    if (in[j] != 1)
      s[k] = stride;
    stride *= ShapedType::isDynamic(in[j]) ? 1 : in[j];
  }
  return s;
}
} // namespace

void dtc::lowering::populateElementwiseLowerings(LoweringTable &t) {
  t.add<FusedOp>([](FusedOp op, Lowering &l) {
    auto out = cast<RankedTensorType>(op.getResult(0).getType());
    SmallVector<Value> ins, outs;
    SmallVector<Attribute> readAt;
    for (Value v : op.getInputs()) {
      ins.push_back(l.ptr(v));
      readAt.push_back(l.b.getDenseI64ArrayAttr(
          strides(cast<RankedTensorType>(v.getType()), out)));
    }
    for (unsigned i = 0; i < op.getNumResults(); ++i)
      outs.push_back(l.resultBuffer(op, i));
    std::string label;
    for (Operation &inner : op.getBody().front().without_terminator())
      if (!isa<ConstantOp, BatchSizeOp>(inner))
        label +=
            (label.empty() ? "" : ",") + inner.getName().stripDialect().str();
    // (Outputs over inputs: dtc-plan-memory gave them the same buffer.)
    DenseI64ArrayAttr inPlace = op->getContext()
                                    ->getLoadedDialect<DtcDialect>()
                                    ->getInPlaceAttrHelper()
                                    .getAttr(op);
    auto kernel = dtcrt::ElementwiseOp::create(
        l.b, l.loc, ins, outs, l.size(out),
        l.b.getDenseI64ArrayAttr(batchAsMinusOne(out.getShape())),
        l.b.getArrayAttr(readAt), l.b.getStringAttr(label), inPlace);
    kernel.getBody().takeBody(op.getBody());
    return success();
  });
}
