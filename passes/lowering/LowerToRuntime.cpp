//===- LowerToRuntime.cpp - The pass: each planned step to dtcrt calls ----===//
//
// The one lowering of the back end. Each step function of the planned
// module (dtc-verify-backend-contract holds) is rebuilt op by op, in order,
// as dtcrt ops: the per-family functions registered in the lowering table
// do each op; this driver does what concerns the whole step: its arguments,
// the outputs (written before the first update, which may change a
// parameter a metric reads), folded momentum after each producer of a
// folded gradient, and the --trace spans of the traced step.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Steps.h"
#include "passes/lowering/Lowering.h"

#include "dialects/dtc/ShapeInference.h"

namespace dtc {
#define GEN_PASS_DEF_LOWERTORUNTIME
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

//===----------------------------------------------------------------------===//
// Lowering helpers
//===----------------------------------------------------------------------===//

Lowering::Lowering(ModuleOp module, func::FuncOp step, OpBuilder &b)
    : b(b), module(module), step(step),
      dtc(module->getContext()->getLoadedDialect<DtcDialect>()),
      loc(step.getLoc()) {
  int32_t index = 0;
  for (ParamOp p : module.getOps<ParamOp>())
    params[p.getSymName()] = {dtc->getPlacementAttrHelper().getAttr(p),
                              index++};
  // Buffers are placed as parameters are; they have no parameter index.
  for (BufferOp p : module.getOps<BufferOp>())
    params[p.getSymName()] = {dtc->getPlacementAttrHelper().getAttr(p), -1};
}

Value Lowering::resultBuffer(Operation *op, unsigned i) {
  DenseI64ArrayAttr offsets = dtc->getOffsetsAttrHelper().getAttr(op);
  Value r = op->getResult(i);
  auto t = cast<RankedTensorType>(r.getType());
  auto space =
      shape::isBatched(t) ? dtcrt::Space::PerSample : dtcrt::Space::Fixed;
  // f32 tensors, and the i32 positions of dtc.arange.
  Type element = t.getElementType().isInteger(32) ? Type(b.getI32Type())
                                                  : Type(b.getF32Type());
  Value p = dtcrt::BufferOp::create(
      b, loc, dtcrt::PtrType::get(b.getContext(), element), space, offsets[i]);
  map(r, p);
  return p;
}

Value Lowering::persistent(int64_t offset) {
  return dtcrt::BufferOp::create(
      b, loc, dtcrt::PtrType::get(b.getContext(), b.getF32Type()),
      dtcrt::Space::Persistent, offset);
}

Value Lowering::scratch(Operation *op) {
  return dtcrt::BufferOp::create(
      b, loc, dtcrt::PtrType::get(b.getContext(), b.getF32Type()),
      dtcrt::Space::Fixed, dtc->getScratchAttrHelper().getAttr(op).getInt());
}

Value Lowering::null() {
  return dtcrt::NullOp::create(
      b, loc, dtcrt::PtrType::get(b.getContext(), b.getF32Type()));
}

Value Lowering::size(ArrayRef<int64_t> shape, size_t from, size_t to) {
  int64_t elements = 1;
  bool batched = false;
  for (size_t i = from; i < to; ++i) {
    if (ShapedType::isDynamic(shape[i]))
      batched = true;
    else
      elements *= shape[i];
  }
  return dtcrt::SizeOp::create(b, loc, b.getI64Type(), elements, batched);
}

Value Lowering::size(Type tensor) {
  auto s = cast<RankedTensorType>(tensor).getShape();
  return size(s, 0, s.size());
}

static Value constant(OpBuilder &b, Location loc, TypedAttr value) {
  return dtcrt::ConstantOp::create(b, loc, value.getType(), value);
}
Value Lowering::i1(bool v) { return constant(b, loc, b.getBoolAttr(v)); }
Value Lowering::i32(int32_t v) {
  return constant(b, loc, b.getI32IntegerAttr(v));
}
Value Lowering::i64(int64_t v) {
  return constant(b, loc, b.getI64IntegerAttr(v));
}
Value Lowering::f32(float v) { return constant(b, loc, b.getF32FloatAttr(v)); }
Value Lowering::scalar(dtcrt::StepScalar which) {
  return dtcrt::StepScalarOp::create(b, loc, b.getF32Type(), which);
}
Value Lowering::hyper() {
  return dtcrt::HyperOp::create(b, loc, dtcrt::HyperType::get(b.getContext()));
}

Value Lowering::array(ArrayRef<int64_t> values, unsigned bits) {
  return dtcrt::ArrayOp::create(
      b, loc, dtcrt::ArrayType::get(b.getContext(), b.getIntegerType(bits)),
      b.getDenseI64ArrayAttr(batchAsMinusOne(values)));
}

SmallVector<int64_t> dtc::lowering::batchAsMinusOne(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> out(shape);
  for (int64_t &d : out)
    if (ShapedType::isDynamic(d))
      d = -1;
  return out;
}

Value Lowering::window2d(Type x, Type y, const shape::Window &w,
                         int64_t groups) {
  // rt::Window2d's values: the NCHW sizes whatever the layout, and the
  // layout's flags (channels last 1, x blocked 2, the result blocked 4).
  auto nchw = [&](Type t) {
    auto s = cast<RankedTensorType>(t).getShape();
    if (shape::isBlocked(t))
      return shape::blockedToNchw(s);
    return w.channelsLast ? shape::nhwcToNchw(s) : SmallVector<int64_t>(s);
  };
  auto xs = nchw(x), ys = nchw(y);
  const int64_t layout = (w.channelsLast ? 1 : 0) |
                         (shape::isBlocked(x) ? 2 : 0) |
                         (shape::isBlocked(y) ? 4 : 0);
  return array({xs[1], xs[2], xs[3], ys[1], w.kernel[0], w.kernel[1],
                w.stride[0], w.stride[1], w.padding[0], w.padding[1],
                w.dilation[0], w.dilation[1], groups, ys[2], ys[3], layout},
               64);
}

std::array<Value, 3> Lowering::axisView(Type tensor, int64_t axis) {
  auto s = cast<RankedTensorType>(tensor).getShape();
  return {size(s, 0, axis), size(s, axis, axis + 1),
          size(s, axis + 1, s.size())};
}

PlacementAttr Lowering::placement(StringRef param) {
  return params.lookup(param).first;
}
int32_t Lowering::paramIndex(StringRef param) {
  return params.lookup(param).second;
}

//===----------------------------------------------------------------------===//
// The driver
//===----------------------------------------------------------------------===//

namespace {
/// Ops that compute (and so are spans of --trace timelines).
bool isTraced(Operation *op) {
  return !isa<ParamRefOp, ReshapeOp, ConstantOp, BatchSizeOp, GradSeedOp,
              func::ReturnOp, AllReduceOp, AllReduceBucketOp, AllReduceStartOp,
              AllReduceWaitOp, ReduceScatterStartOp, ReduceScatterWaitOp,
              AllGatherStartOp, AllGatherWaitOp, GatherParamsStartOp,
              GatherParamsWaitOp, ParamViewOp>(op);
}

/// "matmul", "fused(add,relu)", "update fc1.weight fc1.bias".
std::string traceName(Operation *op) {
  if (auto g = dyn_cast<UpdateGroupOp>(op)) {
    std::string n = "update";
    for (Attribute p : g.getParams())
      n += " " + cast<FlatSymbolRefAttr>(p).getValue().str();
    return n;
  }
  std::string n = op->getName().stripDialect().str();
  if (auto f = dyn_cast<FusedOp>(op)) {
    n += "(";
    bool first = true;
    for (Operation &inner : f.getBody().front().without_terminator()) {
      if (isa<ConstantOp, BatchSizeOp>(inner))
        continue;
      n += (first ? "" : ",") + inner.getName().stripDialect().str();
      first = false;
    }
    n += ")";
  }
  return n;
}

/// Folded momentum: each folded bucket's gradients and the momentum buffers
/// of the parameters they update.
void findFoldedGradients(Lowering &l) {
  l.step.walk([&](Operation *op) {
    if (!isa<AllReduceBucketOp, AllReduceStartOp>(op))
      return;
    BucketPlanAttr plan = l.dtc->getBucketPlanAttrHelper().getAttr(op);
    if (!plan || !plan.getMomentumOffset())
      return;
    for (auto [grad, param] : llvm::zip(op->getOperands(), updatedParams(op)))
      l.momentumOf[grad] = l.placement(param).getStateOffset().value_or(0);
  });
}

void writeOutputs(func::ReturnOp ret, Lowering &l) {
  auto f32Ptr = dtcrt::PtrType::get(l.b.getContext(), l.b.getF32Type());
  Value outputs =
      dtcrt::StepArgOp::create(l.b, l.loc, f32Ptr, dtcrt::StepArg::Outputs);
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    Value at = dtcrt::OffsetOp::create(l.b, l.loc, f32Ptr, outputs, i);
    dtcrt::CopyOp::create(l.b, l.loc, at, l.ptr(v), l.i64(1));
  }
}

LogicalResult lowerStep(func::FuncOp step, ModuleOp module,
                        const LoweringTable &table,
                        const DenseMap<int64_t, BucketPlanAttr> &shardedPlans) {
  MLIRContext *ctx = module.getContext();
  OpBuilder top(step);
  auto lowered = func::FuncOp::create(top, step.getLoc(),
                                      (step.getSymName() + ".lowered").str(),
                                      FunctionType::get(ctx, {}, {}));
  DtcDialect *dtc = ctx->getLoadedDialect<DtcDialect>();
  ctx->getLoadedDialect<dtcrt::DtcrtDialect>()
      ->getFixedBytesAttrHelper()
      .setAttr(lowered,
               top.getI64IntegerAttr(
                   dtc->getArenaAttrHelper().getAttr(step).getFixed()));
  Block *body = lowered.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockEnd(body);
  Lowering l(module, step, b);
  l.shardedPlans = shardedPlans;

  // The step's arguments: the input, then the labels.
  auto f32Ptr = dtcrt::PtrType::get(ctx, b.getF32Type());
  auto i32Ptr = dtcrt::PtrType::get(ctx, b.getI32Type());
  Value input = step.getArgument(0);
  const bool ids =
      cast<RankedTensorType>(input.getType()).getElementType().isInteger(32);
  l.map(input, dtcrt::StepArgOp::create(b, l.loc, ids ? i32Ptr : f32Ptr,
                                        ids ? dtcrt::StepArg::InputIds
                                            : dtcrt::StepArg::Input));
  Value labels = step.getArgument(1);
  bool classes =
      cast<RankedTensorType>(labels.getType()).getElementType().isInteger(32);
  l.map(labels,
        dtcrt::StepArgOp::create(b, l.loc, classes ? i32Ptr : f32Ptr,
                                 classes ? dtcrt::StepArg::ClassLabels
                                         : dtcrt::StepArg::ValueLabels));
  findFoldedGradients(l);
  const bool traced = dtc->getTracedAttrHelper().isAttrPresent(step);
  bool outputsWritten = false;
  auto ret = cast<func::ReturnOp>(step.front().getTerminator());
  for (Operation &op : llvm::make_early_inc_range(step.front())) {
    l.loc = op.getLoc();
    if (isa<UpdateGroupOp, ExportGradientOp, func::ReturnOp>(op) &&
        !outputsWritten) {
      writeOutputs(ret, l);
      outputsWritten = true;
    }
    if (isa<func::ReturnOp>(op)) {
      func::ReturnOp::create(b, l.loc);
      continue;
    }
    const LowerFn *fn = table.lookup(&op);
    if (!fn)
      return op.emitError("dtc-lower-to-runtime has no lowering for '")
             << op.getName() << "'";
    bool span = traced && isTraced(&op);
    if (span)
      dtcrt::TraceBeginOp::create(b, l.loc, traceName(&op));
    if (failed((*fn)(&op, l)))
      return failure();
    // A folded gradient made by anything but a GEMM: into its momentum
    // buffer now.
    for (Value r : op.getResults())
      if (auto it = l.momentumOf.find(r);
          it != l.momentumOf.end() && !l.accumulated.contains(r)) {
        Value buf = l.persistent(it->second);
        Value n = l.size(r.getType());
        Value share = l.scalar(dtcrt::StepScalar::MomentumShare);
        dtcrt::MomentumAccumulateOp::create(b, l.loc, buf, l.ptr(r), n, share);
      }
    if (span)
      dtcrt::TraceEndOp::create(b, l.loc);
  }
  std::string name = step.getSymName().str();
  step.erase();
  lowered.setSymName(name);
  return success();
}

struct LowerToRuntimePass
    : public dtc::impl::LowerToRuntimeBase<LowerToRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyBackendContract(module)))
      return signalPassFailure();
    LoweringTable table;
    populateDataMovementLowerings(table);
    populateLinearLowerings(table);
    populateAttentionLowerings(table);
    populateConvolutionLowerings(table);
    populatePoolingLowerings(table);
    populateRandomLowerings(table);
    populateNormalizationLowerings(table);
    populateReductionLowerings(table);
    populateLossLowerings(table);
    populateElementwiseLowerings(table);
    populateOptimizerLowerings(table);
    populateCollectiveLowerings(table);
    SpecPlan plan = planSpec(module);
    DenseMap<int64_t, BucketPlanAttr> shardedPlans;
    module.walk([&](ReduceScatterStartOp rs) {
      shardedPlans[int64_t(rs.getBucket())] =
          getContext()
              .getLoadedDialect<DtcDialect>()
              ->getBucketPlanAttrHelper()
              .getAttr(rs);
    });
    for (StringRef name : {steps::kTrain, steps::kGrad, steps::kEval})
      if (failed(lowerStep(module.lookupSymbol<func::FuncOp>(name), module,
                           table, shardedPlans)))
        return signalPassFailure();
    if (auto accumulate = module.lookupSymbol<func::FuncOp>(steps::kAccumulate))
      if (failed(lowerStep(accumulate, module, table, shardedPlans)))
        return signalPassFailure();
    buildSpec(module, plan);
    // The dtc module is now the lowered steps and their spec: its
    // parameters, buffers and attributes are in the spec.
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (isa<ParamOp, BufferOp>(op))
        op.erase();
    for (NamedAttribute a : llvm::to_vector(module->getDiscardableAttrs()))
      if (a.getName().getValue().starts_with("dtc."))
        module->removeDiscardableAttr(a.getName());
  }
};
} // namespace
