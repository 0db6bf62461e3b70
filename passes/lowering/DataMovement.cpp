//===- DataMovement.cpp - Parameters, views, constants, gathers -----------===//
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// An op whose one-float result is a number the step gets at run time.
template <typename DtcOp>
void addScalarFill(LoweringTable &t, dtcrt::StepScalar which) {
  t.add<DtcOp>([which](DtcOp op, Lowering &l) {
    Value out = l.resultBuffer(op);
    Value one = l.i64(1);
    Value v = l.scalar(which);
    dtcrt::FillOp::create(l.b, l.loc, out, one, v);
    return success();
  });
}
} // namespace

namespace {
/// Copies each piece of a split or concat between the whole tensor (its
/// buffer `whole`, of type wholeType, viewed [outer, n, inner] around the
/// axis) and the pieces [outer, n_i, inner] (their buffers), each at its
/// offset along the axis; toPieces: whole -> pieces, else pieces -> whole.
void copyPieces(Lowering &l, Value whole, Type wholeType, int64_t axis,
                ValueRange pieceTypesOf, ArrayRef<Value> pieces,
                bool toPieces) {
  auto s = cast<RankedTensorType>(wholeType).getShape();
  int64_t inner = 1;
  for (size_t i = axis + 1; i < s.size(); ++i)
    inner *= s[i];
  auto f32Ptr = dtcrt::PtrType::get(l.b.getContext(), l.b.getF32Type());
  int64_t offset = 0;
  for (auto [v, piece] : llvm::zip(pieceTypesOf, pieces)) {
    const int64_t n = cast<RankedTensorType>(v.getType()).getDimSize(axis);
    Value at =
        dtcrt::OffsetOp::create(l.b, l.loc, f32Ptr, whole, offset * inner);
    Value wholeStride = l.i64(s[axis] * inner), pieceStride = l.i64(n * inner);
    Value rows = l.size(s, 0, axis), len = l.i64(n * inner);
    if (toPieces)
      dtcrt::CopyRowsOp::create(l.b, l.loc, at, wholeStride, piece, pieceStride,
                                rows, len);
    else
      dtcrt::CopyRowsOp::create(l.b, l.loc, piece, pieceStride, at, wholeStride,
                                rows, len);
    offset += n;
  }
}
} // namespace

void dtc::lowering::populateDataMovementLowerings(LoweringTable &t) {
  // The positions 0..n-1, written into their buffer by each step.
  t.add<ArangeOp>([](ArangeOp op, Lowering &l) {
    Value out = l.resultBuffer(op);
    Value n = l.i64(op.getType().getDimSize(0));
    dtcrt::ArangeOp::create(l.b, l.loc, out, n);
    return success();
  });
  // An embedding gathers rows of its table: ids [...] as [rows].
  t.add<EmbeddingOp>([](EmbeddingOp op, Lowering &l) {
    auto ids = op.getIds().getType().getShape();
    auto w = op.getWeight().getType().getShape();
    Value rows = l.size(ids, 0, ids.size());
    Value num = l.i64(w[0]);
    Value dim = l.i64(w[1]);
    Value out = l.resultBuffer(op);
    dtcrt::EmbeddingOp::create(l.b, l.loc, l.ptr(op.getWeight()),
                               l.ptr(op.getIds()), rows, num, dim, out);
    return success();
  });
  t.add<EmbeddingGradOp>([](EmbeddingGradOp op, Lowering &l) {
    auto ids = op.getIds().getType().getShape();
    auto w = op.getType().getShape();
    Value rows = l.size(ids, 0, ids.size());
    Value num = l.i64(w[0]);
    Value dim = l.i64(w[1]);
    Value out = l.resultBuffer(op);
    dtcrt::EmbeddingGradOp::create(l.b, l.loc, l.ptr(op.getIds()),
                                   l.ptr(op.getDy()), rows, num, dim, out);
    return success();
  });
  // A parameter lives in the persistent block.
  t.add<ParamRefOp>([](ParamRefOp op, Lowering &l) {
    l.map(op, l.persistent(l.placement(op.getParam()).getOffset()));
    return success();
  });
  // A view: its operand's buffer.
  t.add<ReshapeOp>([](ReshapeOp op, Lowering &l) {
    l.map(op, l.ptr(op.getX()));
    return success();
  });
  // split and concat: one row copy per piece.
  t.add<SplitOp>([](SplitOp op, Lowering &l) {
    SmallVector<Value> pieces;
    for (unsigned i = 0; i < op.getNumResults(); ++i)
      pieces.push_back(l.resultBuffer(op, i));
    copyPieces(l, l.ptr(op.getX()), op.getX().getType(), op.getAxis(),
               op.getResults(), pieces, /*toPieces=*/true);
    return success();
  });
  t.add<ConcatOp>([](ConcatOp op, Lowering &l) {
    Value whole = l.resultBuffer(op);
    SmallVector<Value> pieces;
    for (Value v : op.getInputs())
      pieces.push_back(l.ptr(v));
    copyPieces(l, whole, op.getType(), op.getAxis(), op.getInputs(), pieces,
               /*toPieces=*/false);
    return success();
  });
  t.add<ConstantOp>([](ConstantOp op, Lowering &l) {
    Value out = l.resultBuffer(op);
    Value n = l.size(op.getType());
    Value v = l.f32(op.getValue().convertToFloat());
    dtcrt::FillOp::create(l.b, l.loc, out, n, v);
    return success();
  });
  // Numbers of the step (the batch, the gradient seed): one float each.
  addScalarFill<BatchSizeOp>(t, dtcrt::StepScalar::Batch);
  addScalarFill<GradSeedOp>(t, dtcrt::StepScalar::GradSeed);
  t.add<TransposeOp>([](TransposeOp op, Lowering &l) {
    auto xt = op.getX().getType();
    Value shape = l.array(xt.getShape(), 64);
    SmallVector<int64_t> perm(op.getPerm());
    Value p = l.array(perm, 32);
    Value out = l.resultBuffer(op);
    Value rank = l.i32(perm.size());
    dtcrt::PermuteOp::create(l.b, l.loc, l.ptr(op.getX()), out, rank, shape, p);
    return success();
  });
  // The prediction rows of `train --predict` (a null pointer otherwise).
  t.add<ExportPredictionOp>([](ExportPredictionOp op, Lowering &l) {
    auto f32Ptr = dtcrt::PtrType::get(l.b.getContext(), l.b.getF32Type());
    Value rows = dtcrt::StepArgOp::create(l.b, l.loc, f32Ptr,
                                          dtcrt::StepArg::Predictions);
    Value n = l.size(op.getPrediction().getType());
    dtcrt::ExportPredictionOp::create(l.b, l.loc, rows,
                                      l.ptr(op.getPrediction()), n);
    return success();
  });
}
