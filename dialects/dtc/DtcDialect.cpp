//===- DtcDialect.cpp - dtc dialect: registration, verifiers, folders -----===//
#include "dialects/dtc/DtcDialect.h"
#include "dialects/dtc/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dtc;

#include "dialects/dtc/DtcDialect.cpp.inc"
#include "dialects/dtc/DtcInterfaces.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/dtc/DtcTypes.cpp.inc"

void DtcDialect::initialize() {
  registerAttributes();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/dtc/DtcTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/dtc/DtcOps.cpp.inc"
      >();
}

Operation *DtcDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto f = dyn_cast<FloatAttr>(value);
  auto t = dyn_cast<RankedTensorType>(type);
  if (!f || !t)
    return nullptr;
  return ConstantOp::create(builder, loc, t,
                            builder.getF32FloatAttr(f.getValueAsDouble()));
}

/// The splat value of a dtc.constant feeding `v`, if any.
static std::optional<double> splatValue(Value v) {
  if (auto c = v.getDefiningOp<ConstantOp>())
    return c.getValue().convertToDouble();
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Parameters and constants
//===----------------------------------------------------------------------===//

/// A checkpoint key: not the metadata's, not under the optimizer state's
/// prefix, no control characters.
static LogicalResult checkKey(Operation *op, StringRef what, StringRef name) {
  if (name.empty() || name == "__metadata__" || name.contains('/'))
    return op->emitOpError()
           << what << " name '" << name
           << "' cannot be a checkpoint key (empty, '__metadata__' or with "
              "'/')";
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return op->emitOpError() << what << " name has a control character";
  return success();
}

LogicalResult ParamOp::verify() {
  auto t = cast<RankedTensorType>(getType());
  if (!t.hasStaticShape())
    return emitOpError("parameter shape must be static, got ") << shape::str(t);
  if (getInit() == InitKind::Normal && getB().convertToDouble() < 0)
    return emitOpError("normal initializer needs std >= 0");
  return checkKey(*this, "parameter", getSymName());
}

LogicalResult BufferOp::verify() {
  auto t = cast<RankedTensorType>(getType());
  if (!t.hasStaticShape())
    return emitOpError("buffer shape must be static, got ") << shape::str(t);
  return checkKey(*this, "buffer", getSymName());
}

static LogicalResult verifyParamSymbol(Operation *op, StringAttr name,
                                       Type expected,
                                       SymbolTableCollection &tables) {
  auto param = tables.lookupNearestSymbolFrom<ParamOp>(op, name);
  if (!param)
    return op->emitOpError("'")
           << name.getValue() << "' is not a dtc.param of this module";
  if (expected && param.getType() != expected)
    return op->emitOpError("type ")
           << expected << " does not match parameter type " << param.getType();
  return success();
}

LogicalResult ParamRefOp::verifySymbolUses(SymbolTableCollection &tables) {
  // A buffer is read as a parameter is (it has no gradient: nothing
  // updates it by name but dtc.update_running_stats).
  if (auto buffer = tables.lookupNearestSymbolFrom<BufferOp>(
          *this, getParamAttr().getAttr())) {
    if (buffer.getType() != getType())
      return emitOpError("type ")
             << getType() << " does not match buffer type " << buffer.getType();
    return success();
  }
  return verifyParamSymbol(*this, getParamAttr().getAttr(), getType(), tables);
}

LogicalResult ApplyGradientOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyParamSymbol(*this, getParamAttr().getAttr(), getGrad().getType(),
                           tables);
}

LogicalResult
AccumulateGradientOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyParamSymbol(*this, getParamAttr().getAttr(), getGrad().getType(),
                           tables);
}

LogicalResult
TakeAccumulatedOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyParamSymbol(*this, getParamAttr().getAttr(), getGrad().getType(),
                           tables);
}

LogicalResult UpdateGroupOp::verify() {
  if (getParams().size() != getGrads().size() || getGrads().empty())
    return emitOpError("needs one gradient per parameter, and at least one");
  if (getGradScale() && getMomentumFolded())
    return emitOpError("cannot scale folded momentum (its sums are taken "
                       "before the scale exists)");
  auto module = (*this)->getParentOfType<ModuleOp>();
  for (auto [name, grad] : llvm::zip(getParams(), getGrads())) {
    auto sym = cast<FlatSymbolRefAttr>(name);
    auto param =
        module ? module.lookupSymbol<ParamOp>(sym.getAttr()) : ParamOp();
    if (!param)
      return emitOpError("'")
             << sym.getValue() << "' is not a dtc.param of this module";
    if (param.getType() != grad.getType())
      return emitOpError("gradient type ")
             << grad.getType() << " does not match parameter type "
             << param.getType();
  }
  return success();
}

LogicalResult
ExportGradientOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (getOffset() < 0)
    return emitOpError("offset must be >= 0");
  return verifyParamSymbol(*this, getParamAttr().getAttr(), getGrad().getType(),
                           tables);
}

LogicalResult ConstantOp::verify() {
  if (!getType().hasStaticShape())
    return emitOpError("constant must have a static shape");
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getX().getDefiningOp<NegOp>())
    return inner.getX();
  return {};
}

#define DTC_BINARY_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> l, \
                                     Adaptor a, SmallVectorImpl<Type> &out) {  \
    auto t = shape::broadcast(l, a.getLhs().getType(), a.getRhs().getType());  \
    if (failed(t))                                                             \
      return failure();                                                        \
    out.push_back(*t);                                                         \
    return success();                                                          \
  }
DTC_BINARY_INFER(AddOp)
DTC_BINARY_INFER(SubOp)
DTC_BINARY_INFER(MulOp)
DTC_BINARY_INFER(DivOp)
#undef DTC_BINARY_INFER

/// `x op c` is `x` when c is the identity of op and no broadcasting happens.
static OpFoldResult foldIdentity(Value x, Value c, Type resultType,
                                 double identity) {
  auto v = splatValue(c);
  if (v && *v == identity && x.getType() == resultType)
    return x;
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor) {
  if (auto r = foldIdentity(getLhs(), getRhs(), getType(), 0.0))
    return r;
  return foldIdentity(getRhs(), getLhs(), getType(), 0.0);
}
OpFoldResult SubOp::fold(FoldAdaptor) {
  return foldIdentity(getLhs(), getRhs(), getType(), 0.0);
}
OpFoldResult MulOp::fold(FoldAdaptor) {
  if (auto r = foldIdentity(getLhs(), getRhs(), getType(), 1.0))
    return r;
  return foldIdentity(getRhs(), getLhs(), getType(), 1.0);
}
OpFoldResult DivOp::fold(FoldAdaptor) {
  return foldIdentity(getLhs(), getRhs(), getType(), 1.0);
}

LogicalResult BroadcastToOp::verify() {
  if (!shape::broadcastsTo(getX().getType().getShape(), getType().getShape()))
    return emitOpError("cannot broadcast ")
           << shape::str(getX().getType()) << " to " << shape::str(getType());
  return success();
}

OpFoldResult BroadcastToOp::fold(FoldAdaptor) {
  if (getX().getType() == getType())
    return getX();
  return {};
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult SumToOp::verify() {
  if (!shape::broadcastsTo(getType().getShape(), getX().getType().getShape()))
    return emitOpError("cannot sum ")
           << shape::str(getX().getType()) << " to " << shape::str(getType())
           << ": the result must broadcast to the operand";
  return success();
}

OpFoldResult SumToOp::fold(FoldAdaptor) {
  if (getX().getType() == getType())
    return getX();
  return {};
}

LogicalResult ReshapeOp::verify() {
  return shape::reshape(getLoc(), getX().getType(), getType().getShape());
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getX().getType() == getType())
    return getX();
  return {};
}

namespace {
/// reshape(reshape(x)) -> reshape(x)
struct ReshapeOfReshape : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getX().getDefiningOp<ReshapeOp>();
    if (!inner)
      return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), inner.getX());
    return success();
  }
};
} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *context) {
  results.add<ReshapeOfReshape>(context);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> l,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  auto t = shape::transpose(l, a.getX().getType(), a.getPerm());
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  auto perm = getPerm();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getX();
  // transpose(transpose(x, p), q) == x when q undoes p.
  if (auto inner = getX().getDefiningOp<TransposeOp>()) {
    auto p = inner.getPerm();
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity &= p[perm[i]] == (int64_t)i;
    if (identity)
      return inner.getX();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

LogicalResult SplitOp::verify() {
  if (getResults().empty())
    return emitOpError("has no results");
  auto whole = shape::concat(getLoc(), getResults().getTypes(), getAxis());
  if (failed(whole))
    return failure();
  if (*whole != getX().getType())
    return emitOpError("results join into ")
           << *whole << ", not the input's " << getX().getType();
  return success();
}

LogicalResult ConcatOp::verify() {
  auto whole = shape::concat(getLoc(), getInputs().getTypes(), getAxis());
  if (failed(whole))
    return failure();
  if (*whole != getType())
    return emitOpError("result must be ") << *whole << ", got " << getType();
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> l, Adaptor a,
                                         SmallVectorImpl<Type> &out) {
  auto t = shape::matmul(l, a.getLhs().getType(), a.getRhs().getType(),
                         a.getTransposeLhs(), a.getTransposeRhs(),
                         a.getContractBatch());
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

namespace {
/// matmul(transpose(a), b) -> matmul(a, b) {transpose_lhs}; same for rhs. GEMM
/// libraries read a transposed operand in place, so the copy disappears.
struct FoldTransposeIntoMatmul : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    // A transpose of the last two dimensions only.
    auto swapsAxes = [](TransposeOp t) {
      if (!t)
        return false;
      ArrayRef<int64_t> p = t.getPerm();
      int64_t r = p.size();
      for (int64_t i = 0; i + 2 < r; ++i)
        if (p[i] != i)
          return false;
      return r >= 2 && p[r - 2] == r - 1 && p[r - 1] == r - 2;
    };
    auto lhsT = op.getLhs().getDefiningOp<TransposeOp>();
    auto rhsT = op.getRhs().getDefiningOp<TransposeOp>();
    if (!swapsAxes(lhsT))
      lhsT = nullptr;
    if (!swapsAxes(rhsT))
      rhsT = nullptr;
    if (!lhsT && !rhsT)
      return failure();
    Value lhs = lhsT ? lhsT.getX() : op.getLhs();
    Value rhs = rhsT ? rhsT.getX() : op.getRhs();
    bool tl = op.getTransposeLhs() ^ (lhsT != nullptr);
    bool tr = op.getTransposeRhs() ^ (rhsT != nullptr);
    // Only where the flags are legal (a broadcast 2-D rhs takes an lhs
    // that is not transposed; contract_batch an lhs that is, and not the
    // rhs).
    if (failed(shape::matmul(std::nullopt, lhs.getType(), rhs.getType(), tl, tr,
                             op.getContractBatch())))
      return failure();
    rewriter.replaceOpWithNewOp<MatmulOp>(op, op.getType(), lhs, rhs, tl, tr,
                                          op.getContractBatch());
    return success();
  }
};
} // namespace

void MatmulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<FoldTransposeIntoMatmul>(context);
}

//===----------------------------------------------------------------------===//
// Reductions, softmax, losses
//===----------------------------------------------------------------------===//

#define DTC_REDUCE_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> l, \
                                     Adaptor a, SmallVectorImpl<Type> &out) {  \
    auto t = shape::reduce(l, a.getX().getType(), a.getAxis());                \
    if (failed(t))                                                             \
      return failure();                                                        \
    out.push_back(*t);                                                         \
    return success();                                                          \
  }
DTC_REDUCE_INFER(ReduceSumOp)
DTC_REDUCE_INFER(ReduceMeanOp)
DTC_REDUCE_INFER(ReduceMaxOp)
#undef DTC_REDUCE_INFER

LogicalResult ReduceMaxGradOp::verify() {
  if (getDy().getType() != getY().getType() || getType() != getX().getType())
    return emitOpError("needs dy of the reduction's result type and returns "
                       "the input type");
  auto y = shape::reduce(getLoc(), getX().getType(), getAxis());
  if (failed(y))
    return failure();
  if (*y != getY().getType())
    return emitOpError("y must be the reduction of x over the axis");
  return success();
}
LogicalResult SoftmaxGradOp::verify() {
  return shape::axis(getLoc(), getType().getRank(), getAxis());
}
LogicalResult LogSoftmaxGradOp::verify() {
  return shape::axis(getLoc(), getType().getRank(), getAxis());
}
LogicalResult CrossEntropyGradOp::verify() {
  if (failed(shape::crossEntropy(getLoc(), getLogits().getType(),
                                 getLabels().getType())))
    return failure();
  if (getType() != getLogits().getType())
    return emitOpError("result must have the logits' type");
  return success();
}
LogicalResult MseGradOp::verify() {
  if (failed(shape::mse(getLoc(), getPrediction().getType(),
                        getTarget().getType())))
    return failure();
  if (getType() != getPrediction().getType())
    return emitOpError("result must have the prediction's type");
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return shape::axis(getLoc(), getType().getRank(), getAxis());
}
LogicalResult LogSoftmaxOp::verify() {
  return shape::axis(getLoc(), getType().getRank(), getAxis());
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> l,
                                               Adaptor a,
                                               SmallVectorImpl<Type> &out) {
  auto t =
      shape::crossEntropy(l, a.getLogits().getType(), a.getLabels().getType());
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

LogicalResult AccuracyOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> l, Adaptor a,
                                           SmallVectorImpl<Type> &out) {
  auto t =
      shape::crossEntropy(l, a.getLogits().getType(), a.getLabels().getType());
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> l,
                                            Adaptor a,
                                            SmallVectorImpl<Type> &out) {
  auto t = shape::embedding(l, a.getIds().getType(), a.getWeight().getType());
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

LogicalResult ArangeOp::verify() {
  if (!getType().hasStaticShape())
    return emitOpError("needs a length that is not the batch");
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  auto w = getType().getShape();
  if (w.size() != 2 || !getType().hasStaticShape())
    return emitOpError("result must be a table [num, dim], got ") << getType();
  auto y = shape::embedding(getLoc(), getIds().getType(), getType());
  if (failed(y))
    return failure();
  if (*y != getDy().getType())
    return emitOpError("dy must be ")
           << *y << ", the ids' shape with the table's dim, got "
           << getDy().getType();
  return success();
}

LogicalResult MseOp::inferReturnTypes(MLIRContext *, std::optional<Location> l,
                                      Adaptor a, SmallVectorImpl<Type> &out) {
  auto t = shape::mse(l, a.getPrediction().getType(), a.getTarget().getType());
  if (failed(t))
    return failure();
  out.push_back(*t);
  return success();
}

//===----------------------------------------------------------------------===//
// Fused kernels
//===----------------------------------------------------------------------===//

LogicalResult FusedOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body must take one argument per input");
  for (auto [arg, in] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError("body argument types must match the inputs");
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().getTypes() != getResultTypes())
    return emitOpError("body must yield values of the result types");
  if (getNumResults() == 0)
    return emitOpError("must have at least one result");
  for (Type t : getResultTypes())
    if (t != getResult(0).getType())
      return emitOpError("all results must have the same shape");
  for (Operation &op : body.without_terminator())
    if (!isElementwise(&op) && !isa<ConstantOp, BatchSizeOp>(op))
      return op.emitOpError("is not elementwise and cannot be in a fused body");
  return success();
}

//===----------------------------------------------------------------------===//
// All-reduce
//===----------------------------------------------------------------------===//

/// A gradient reduced in place must have no other reader.
static LogicalResult verifyInPlace(Operation *op, ValueRange grads) {
  for (Value g : grads)
    for (Operation *user : g.getUsers())
      if (user != op && !isa<AllReduceStartOp, AllReduceWaitOp,
                             ReduceScatterStartOp, ReduceScatterWaitOp>(user))
        return op->emitOpError("reduces its operands in place, but one is "
                               "also used by '")
               << user->getName() << "'";
  return success();
}

LogicalResult AllReduceOp::verify() { return verifyInPlace(*this, getGrad()); }

LogicalResult AllReduceBucketOp::verify() {
  if (getGrads().empty())
    return emitOpError("needs at least one gradient");
  if (getGrads().getTypes() != getResultTypes())
    return emitOpError("result types must match the gradients");
  return verifyInPlace(*this, getGrads());
}

LogicalResult AllReduceStartOp::verify() {
  if (getGrads().empty())
    return emitOpError("needs at least one gradient");
  return verifyInPlace(*this, getGrads());
}

LogicalResult AllReduceWaitOp::verify() {
  auto start = getRequest().getDefiningOp<AllReduceStartOp>();
  if (!start)
    return emitOpError("request must come from dtc.all_reduce_start");
  if (!llvm::equal(start.getGrads(), getGrads()) ||
      start.getBucket() != getBucket())
    return emitOpError("must wait for the same gradients and bucket as its "
                       "start");
  if (getGrads().getTypes() != getResultTypes())
    return emitOpError("result types must match the gradients");
  return success();
}

LogicalResult ReduceScatterStartOp::verify() {
  if (getGrads().empty())
    return emitOpError("needs at least one gradient");
  // (Its size against the bucket's: the memory plan checks it, which knows
  // the layout and the ranks.)
  if (getShard().getType().getNumElements() < 1)
    return emitOpError("needs a shard of at least one float");
  for (Operation *user : getShard().getUsers())
    if (!isa<ReduceScatterWaitOp>(user))
      return emitOpError("shard is written until the wait: only "
                         "dtc.reduce_scatter_wait may read it, not '")
             << user->getName() << "'";
  return verifyInPlace(*this, getGrads());
}

LogicalResult ReduceScatterWaitOp::verify() {
  auto start = getRequest().getDefiningOp<ReduceScatterStartOp>();
  if (!start)
    return emitOpError("request must come from dtc.reduce_scatter_start");
  if (!llvm::equal(start.getGrads(), getGrads()) ||
      start.getBucket() != getBucket() || start.getShard() != getShard())
    return emitOpError("must wait for the same gradients, shard and bucket as "
                       "its start");
  if (getResult().getType() != getShard().getType())
    return emitOpError("result type must be the shard's");
  return success();
}

LogicalResult ShardUpdateOp::verify() {
  auto wait = getShard().getDefiningOp<ReduceScatterWaitOp>();
  if (!wait || wait.getBucket() != getBucket())
    return emitOpError("shard must come from the dtc.reduce_scatter_wait of "
                       "bucket ")
           << getBucket();
  if (getParams().size() != wait.getGrads().size())
    return emitOpError("updates ")
           << getParams().size() << " parameters of a bucket of "
           << wait.getGrads().size() << " gradients";
  return success();
}

LogicalResult GatherParamsStartOp::verify() {
  for (Operation *user : getGathered().getUsers())
    if (!isa<GatherParamsWaitOp>(user))
      return emitOpError("gathered buffer is written until the wait: only "
                         "dtc.gather_params_wait may read it, not '")
             << user->getName() << "'";
  return success();
}

LogicalResult GatherParamsWaitOp::verify() {
  auto start = getRequest().getDefiningOp<GatherParamsStartOp>();
  if (!start || start.getBucket() != getBucket() ||
      start.getGathered() != getGathered())
    return emitOpError("must wait for the gather_params_start of bucket ")
           << getBucket() << " and its buffer";
  return success();
}

LogicalResult ParamViewOp::verify() {
  int64_t n = getType().getNumElements(),
          all = getGathered().getType().getNumElements();
  if (int64_t(getOffset()) + n > all)
    return emitOpError("views floats [")
           << getOffset() << ", " << getOffset() + n << ") of a bucket of "
           << all;
  return success();
}

LogicalResult AllGatherStartOp::verify() {
  if (getCarried() && !getRequest().use_empty())
    return emitOpError("a carried all-gather is waited for by a later step "
                       "(dtc.all_gather_wait without a request), not by its "
                       "own");
  return success();
}

LogicalResult AllGatherWaitOp::verify() {
  if (!getRequest())
    return success(); // the bucket's carried all-gather, if any
  auto start = getRequest().getDefiningOp<AllGatherStartOp>();
  if (!start || start.getBucket() != getBucket())
    return emitOpError("request must come from the dtc.all_gather_start of "
                       "bucket ")
           << getBucket();
  return success();
}

// batch_norm_grad's types: `x, weight`, then `, dy <type>` when dy's type
// is not x's (a fused max-pool gradient).
static ParseResult parseBatchNormGradTypes(OpAsmParser &p, Type &x,
                                           Type &weight, Type &dy) {
  if (p.parseType(x) || p.parseComma() || p.parseType(weight))
    return failure();
  dy = x;
  if (succeeded(p.parseOptionalComma()))
    return failure(p.parseKeyword("dy") || p.parseType(dy));
  return success();
}
static void printBatchNormGradTypes(OpAsmPrinter &p, Operation *, Type x,
                                    Type weight, Type dy) {
  p << x << ", " << weight;
  if (dy != x)
    p << ", dy " << dy;
}

#define GET_OP_CLASSES
#include "dialects/dtc/DtcOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Tied results (TiedOpInterface)
//===----------------------------------------------------------------------===//

Value ReshapeOp::getTiedOperand(unsigned) { return getX(); }
Value AllReduceOp::getTiedOperand(unsigned) { return getGrad(); }
Value AllReduceBucketOp::getTiedOperand(unsigned index) {
  return getGrads()[index];
}
Value AllReduceWaitOp::getTiedOperand(unsigned index) {
  return getGrads()[index];
}
// Stage 1: the shard is this rank's part of the bucket's own buffer (whose
// first gradient stands for it); stage 2: a buffer of its own.
Value ReduceScatterStartOp::getTiedOperand(unsigned index) {
  return index == 1 && getInPlace() ? getGrads()[0] : Value();
}
Value ReduceScatterWaitOp::getTiedOperand(unsigned) { return getShard(); }
Value GatherParamsWaitOp::getTiedOperand(unsigned) { return getGathered(); }
Value ParamViewOp::getTiedOperand(unsigned) { return getGathered(); }

//===----------------------------------------------------------------------===//
// Gradient collectives and the updates that read their sums
//===----------------------------------------------------------------------===//

ResultRange dtc::sumsOf(Operation *collective) {
  if (auto start = dyn_cast<AllReduceStartOp>(collective)) {
    for (Operation *user : start.getRequest().getUsers())
      if (auto wait = dyn_cast<AllReduceWaitOp>(user))
        return wait.getResults();
    return collective->getResults().drop_front(collective->getNumResults());
  }
  return collective->getResults();
}

SmallVector<StringRef> dtc::updatedParams(Operation *collective) {
  SmallVector<StringRef> params;
  // A reduce-scatter: the parameters of the update of its shard.
  if (auto start = dyn_cast<ReduceScatterStartOp>(collective)) {
    for (Operation *user : start.getRequest().getUsers())
      if (auto wait = dyn_cast<ReduceScatterWaitOp>(user))
        for (Operation *reader : wait.getResult().getUsers())
          if (auto update = dyn_cast<ShardUpdateOp>(reader))
            for (Attribute p : update.getParams())
              params.push_back(cast<FlatSymbolRefAttr>(p).getValue());
    if (params.empty())
      params.resize(start.getGrads().size());
    return params;
  }
  for (Value sum : sumsOf(collective)) {
    StringRef param;
    if (sum.hasOneUse()) {
      OpOperand &use = *sum.getUses().begin();
      if (auto u = dyn_cast<ApplyGradientOp>(use.getOwner()))
        param = u.getParam();
      else if (auto g = dyn_cast<UpdateGroupOp>(use.getOwner()))
        param = cast<FlatSymbolRefAttr>(g.getParams()[use.getOperandNumber()])
                    .getValue();
    }
    params.push_back(param);
  }
  return params;
}

LogicalResult ExportPredictionOp::verify() {
  RankedTensorType t = getPrediction().getType();
  bool ok = t.getRank() >= 2 && ShapedType::isDynamic(t.getDimSize(0));
  for (int64_t d = 1; ok && d < t.getRank(); ++d)
    ok = !ShapedType::isDynamic(t.getDimSize(d));
  if (!ok)
    return emitOpError("exports a prediction [B, ...] (the batch, then static "
                       "dimensions), "
                       "got ")
           << shape::str(t);
  return success();
}
