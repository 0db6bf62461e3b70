//===- Gradients.cpp - Vector-Jacobian products of the dtc ops ------------===//
//
// Each differentiable op implements GradientOpInterface::buildGradients here.
// Gradients of broadcasting operands are summed back to the operand's shape
// with dtc.sum_to, so every operand gradient has the operand's exact type.
//
//===----------------------------------------------------------------------===//
#include "dialects/dtc/DtcDialect.h"
#include "dialects/dtc/ShapeInference.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace dtc;

namespace {
/// Small builder helpers that compute result types through shape inference.
struct G {
  OpBuilder &b;
  Location loc;

  Value scalar(double v) {
    return ConstantOp::create(b, loc, RankedTensorType::get({}, b.getF32Type()),
                              b.getF32FloatAttr(v));
  }
  template <typename OpTy> Value bin(Value l, Value r) {
    auto t = shape::broadcast(std::nullopt, l.getType(), r.getType());
    return OpTy::create(b, loc, *t, l, r);
  }
  Value add(Value l, Value r) { return bin<AddOp>(l, r); }
  Value sub(Value l, Value r) { return bin<SubOp>(l, r); }
  Value mul(Value l, Value r) { return bin<MulOp>(l, r); }
  Value div(Value l, Value r) { return bin<DivOp>(l, r); }
  Value neg(Value x) { return NegOp::create(b, loc, x.getType(), x); }
  /// `g` summed down to `type` (a no-op when the shapes already agree).
  Value sumTo(Value g, Type type) {
    if (g.getType() == type)
      return g;
    return SumToOp::create(b, loc, type, g);
  }
  Value matmul(Value l, Value r, bool tl, bool tr, bool contract = false) {
    auto t =
        shape::matmul(std::nullopt, l.getType(), r.getType(), tl, tr, contract);
    return MatmulOp::create(b, loc, *t, l, r, tl, tr, contract);
  }
  /// dy of a reduction over `axis` spread back over the input's shape.
  Value unreduce(Value dy, RankedTensorType xType, int64_t axis) {
    SmallVector<int64_t> keep(xType.getShape());
    keep[axis] = 1;
    auto keepType = RankedTensorType::get(keep, xType.getElementType());
    Value r = ReshapeOp::create(b, loc, keepType, dy);
    return BroadcastToOp::create(b, loc, xType, r);
  }
};
} // namespace

#define DTC_GRAD(OP)                                                           \
  LogicalResult OP::buildGradients(OpBuilder &builder, ValueRange resultGrads, \
                                   SmallVectorImpl<Value> &operandGrads)
#define DTC_G                                                                  \
  G g{builder, getLoc()};                                                      \
  Value dy = resultGrads[0];                                                   \
  (void)g;                                                                     \
  (void)dy

// Unary elementwise ---------------------------------------------------------

DTC_GRAD(NegOp) {
  DTC_G;
  operandGrads.push_back(g.neg(dy));
  return success();
}
DTC_GRAD(ReluOp) { // from the result: y > 0 exactly where x > 0
  DTC_G;
  operandGrads.push_back(
      ReluGradOp::create(builder, getLoc(), getType(), getResult(), dy));
  return success();
}
DTC_GRAD(GeluOp) {
  DTC_G;
  operandGrads.push_back(
      GeluGradOp::create(builder, getLoc(), getType(), getX(), dy));
  return success();
}
DTC_GRAD(SiluOp) {
  DTC_G;
  operandGrads.push_back(
      SiluGradOp::create(builder, getLoc(), getType(), getX(), dy));
  return success();
}
DTC_GRAD(GeluTanhOp) {
  DTC_G;
  operandGrads.push_back(
      GeluTanhGradOp::create(builder, getLoc(), getType(), getX(), dy));
  return success();
}
DTC_GRAD(TanhOp) { // dy * (1 - y^2)
  DTC_G;
  Value y = getResult();
  // One op per statement: the order of function arguments is unspecified,
  // and the IR must not depend on the host compiler.
  Value yy = g.mul(y, y);
  Value one = g.scalar(1);
  Value oneMinus = g.sub(one, yy);
  operandGrads.push_back(g.mul(dy, oneMinus));
  return success();
}
DTC_GRAD(SigmoidOp) { // dy * y * (1 - y)
  DTC_G;
  Value y = getResult();
  Value one = g.scalar(1);
  Value oneMinus = g.sub(one, y);
  Value dyy = g.mul(dy, y);
  operandGrads.push_back(g.mul(dyy, oneMinus));
  return success();
}
DTC_GRAD(ExpOp) { // dy * y
  DTC_G;
  operandGrads.push_back(g.mul(dy, getResult()));
  return success();
}
DTC_GRAD(LogOp) { // dy / x
  DTC_G;
  operandGrads.push_back(g.div(dy, getX()));
  return success();
}
DTC_GRAD(SqrtOp) { // dy * 0.5 / y
  DTC_G;
  operandGrads.push_back(g.div(g.mul(dy, g.scalar(0.5)), getResult()));
  return success();
}

// Binary elementwise (broadcasting) -----------------------------------------

DTC_GRAD(AddOp) {
  DTC_G;
  operandGrads.push_back(g.sumTo(dy, getLhs().getType()));
  operandGrads.push_back(g.sumTo(dy, getRhs().getType()));
  return success();
}
DTC_GRAD(SubOp) {
  DTC_G;
  operandGrads.push_back(g.sumTo(dy, getLhs().getType()));
  operandGrads.push_back(g.sumTo(g.neg(dy), getRhs().getType()));
  return success();
}
DTC_GRAD(MulOp) {
  DTC_G;
  operandGrads.push_back(g.sumTo(g.mul(dy, getRhs()), getLhs().getType()));
  operandGrads.push_back(g.sumTo(g.mul(dy, getLhs()), getRhs().getType()));
  return success();
}
DTC_GRAD(DivOp) { // d/dl = dy / r ; d/dr = -dy * y / r
  DTC_G;
  operandGrads.push_back(g.sumTo(g.div(dy, getRhs()), getLhs().getType()));
  operandGrads.push_back(g.sumTo(g.neg(g.div(g.mul(dy, getResult()), getRhs())),
                                 getRhs().getType()));
  return success();
}

// Shape ops -----------------------------------------------------------------

DTC_GRAD(BroadcastToOp) {
  DTC_G;
  operandGrads.push_back(g.sumTo(dy, getX().getType()));
  return success();
}
DTC_GRAD(SumToOp) {
  DTC_G;
  operandGrads.push_back(
      BroadcastToOp::create(builder, getLoc(), getX().getType(), dy));
  return success();
}
DTC_GRAD(ReshapeOp) {
  DTC_G;
  operandGrads.push_back(
      ReshapeOp::create(builder, getLoc(), getX().getType(), dy));
  return success();
}
DTC_GRAD(TransposeOp) {
  DTC_G;
  auto perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  operandGrads.push_back(
      TransposeOp::create(builder, getLoc(), getX().getType(), dy, inverse));
  return success();
}

// Split and concat: each other's gradient
// --------------------------------------

DTC_GRAD(SplitOp) {
  auto types = getX().getType();
  operandGrads.push_back(
      ConcatOp::create(builder, getLoc(), types, resultGrads, getAxis()));
  return success();
}
DTC_GRAD(ConcatOp) {
  SmallVector<Type> types(getInputs().getTypes());
  auto split =
      SplitOp::create(builder, getLoc(), types, resultGrads[0], getAxis());
  operandGrads.append(split.getResults().begin(), split.getResults().end());
  return success();
}

// Matmul: C = op(A) op(B) ---------------------------------------------------

DTC_GRAD(MatmulOp) {
  DTC_G;
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  Value a = getLhs(), bm = getRhs();
  if (getContractBatch())
    return emitOpError("has no gradient (it is one: dtc derives first "
                       "derivatives only)");
  // dop(A) = dC op(B)^T ; dop(B) = op(A)^T dC ; transposed back when stored
  // so; per leading index when both are batched.
  if (cast<RankedTensorType>(bm.getType()).getRank() == 2 &&
      cast<RankedTensorType>(a.getType()).getRank() > 2) {
    // B broadcast over A's leading dimensions (A not transposed): dA per
    // row as for 2-D, dB summed over every row (contract_batch).
    operandGrads.push_back(g.matmul(dy, bm, false, !tb));
    operandGrads.push_back(tb ? g.matmul(dy, a, true, false, true)
                              : g.matmul(a, dy, true, false, true));
    return success();
  }
  operandGrads.push_back(ta ? g.matmul(bm, dy, tb, true)
                            : g.matmul(dy, bm, false, !tb));
  operandGrads.push_back(tb ? g.matmul(dy, a, true, ta)
                            : g.matmul(a, dy, !ta, false));
  return success();
}

DTC_GRAD(AttentionOp) {
  DTC_G; // lse's gradient (never read by a loss) is zero: only dy counts
  auto grad = AttentionGradOp::create(
      builder, getLoc(), getQ().getType(), getK().getType(), getV().getType(),
      getQ(), getK(), getV(), getResult(), getLse(), dy, getCausal(),
      getScale(), getTokensFirst());
  operandGrads.append({grad.getDq(), grad.getDk(), grad.getDv()});
  return success();
}

DTC_GRAD(EmbeddingOp) {
  DTC_G;
  operandGrads.push_back(Value()); // integer ids take no gradient
  operandGrads.push_back(EmbeddingGradOp::create(
      builder, getLoc(), getWeight().getType(), getIds(), dy));
  return success();
}

// Reductions and normalizations ---------------------------------------------

DTC_GRAD(ReduceSumOp) {
  DTC_G;
  operandGrads.push_back(g.unreduce(dy, getX().getType(), getAxis()));
  return success();
}
DTC_GRAD(ReduceMeanOp) {
  DTC_G;
  int64_t n = getX().getType().getDimSize(getAxis());
  Value count = ShapedType::isDynamic(n)
                    ? Value(BatchSizeOp::create(
                          builder, getLoc(),
                          RankedTensorType::get({}, builder.getF32Type())))
                    : g.scalar(double(n));
  operandGrads.push_back(
      g.unreduce(g.div(dy, count), getX().getType(), getAxis()));
  return success();
}
DTC_GRAD(ReduceMaxOp) {
  DTC_G;
  operandGrads.push_back(ReduceMaxGradOp::create(
      builder, getLoc(), getX().getType(), getX(), getResult(), dy, getAxis()));
  return success();
}
DTC_GRAD(SoftmaxOp) {
  DTC_G;
  operandGrads.push_back(SoftmaxGradOp::create(builder, getLoc(), getType(),
                                               getResult(), dy, getAxis()));
  return success();
}
DTC_GRAD(LogSoftmaxOp) {
  DTC_G;
  operandGrads.push_back(LogSoftmaxGradOp::create(builder, getLoc(), getType(),
                                                  getResult(), dy, getAxis()));
  return success();
}

// Losses --------------------------------------------------------------------

DTC_GRAD(CrossEntropyOp) {
  DTC_G;
  operandGrads.push_back(CrossEntropyGradOp::create(
      builder, getLoc(), getLogits().getType(), getLogits(), getLabels(), dy,
      getIgnoreIndex()));
  operandGrads.push_back(Value()); // integer labels take no gradient
  return success();
}
DTC_GRAD(MseOp) {
  DTC_G;
  Value dp = MseGradOp::create(builder, getLoc(), getPrediction().getType(),
                               getPrediction(), getTarget(), dy);
  operandGrads.push_back(dp);
  operandGrads.push_back(g.neg(dp));
  return success();
}

// Convolution and pooling ---------------------------------------------------

DTC_GRAD(Conv2dOp) {
  DTC_G;
  operandGrads.push_back(Conv2dGradInputOp::create(
      builder, getLoc(), getX().getType(), dy, getWeight(), getStride(),
      getPadding(), getDilation(), getGroups(), getChannelsLast()));
  // The bias's gradient comes from the weight gradient's pass over dy.
  SmallVector<Type, 2> types{getWeight().getType()};
  if (getBias())
    types.push_back(getBias().getType());
  auto gw = Conv2dGradWeightOp::create(builder, getLoc(), types, getX(), dy,
                                       getStride(), getPadding(), getDilation(),
                                       getGroups(), getChannelsLast());
  operandGrads.push_back(gw.getResult());
  if (getBias())
    operandGrads.push_back(gw.getBiasGrad());
  return success();
}
DTC_GRAD(MaxPool2dOp) {
  DTC_G;
  operandGrads.push_back(MaxPool2dGradOp::create(
      builder, getLoc(), getX().getType(), getX(), dy, getKernel(), getStride(),
      getPadding(), getChannelsLast()));
  return success();
}
DTC_GRAD(AvgPool2dOp) {
  DTC_G;
  operandGrads.push_back(AvgPool2dGradOp::create(
      builder, getLoc(), getX().getType(), dy, getKernel(), getStride(),
      getPadding(), getCountIncludePad(), getChannelsLast()));
  return success();
}

// Random ops ----------------------------------------------------------------

DTC_GRAD(DropoutOp) {
  DTC_G;
  operandGrads.push_back(DropoutGradOp::create(builder, getLoc(), getType(), dy,
                                               getPAttr(), getSaltAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// Batch normalization
//===----------------------------------------------------------------------===//

// The statistics' own gradients are zero (they feed only the running
// statistics); the running statistics take none. With relu, the gradient
// reads the result for the ReLU's mask.
DTC_GRAD(LayerNormOp) {
  auto g = LayerNormGradOp::create(
      builder, getLoc(),
      TypeRange{getX().getType(), getWeight().getType(), getWeight().getType()},
      getX(), resultGrads[0], getMean(), getRstd(), getWeight());
  operandGrads.append({g.getDx(), g.getDweight(), g.getDbias()});
  return success();
}

// rstd feeds only the gradient: it takes none.
DTC_GRAD(RmsNormOp) {
  auto g = RmsNormGradOp::create(
      builder, getLoc(), TypeRange{getX().getType(), getWeight().getType()},
      getX(), resultGrads[0], getRstd(), getWeight());
  operandGrads.append({g.getDx(), g.getDweight()});
  return success();
}

DTC_GRAD(BatchNormOp) {
  Value dy = resultGrads[0];
  Value activated = getRelu() ? getResult() : Value();
  auto g = BatchNormGradOp::create(
      builder, getLoc(),
      TypeRange{getX().getType(), getWeight().getType(), getWeight().getType()},
      getX(), dy, getMean(), getVar(), getWeight(), activated, getEpsAttr(),
      getChannelsLastAttr(), /*pool_kernel=*/nullptr, /*pool_stride=*/nullptr,
      /*pool_padding=*/nullptr);
  operandGrads.append(
      {g.getDx(), g.getDweight(), g.getDbias(), Value(), Value()});
  return success();
}
