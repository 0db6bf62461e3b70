//===- Spec.cpp - The program's dtcrt.spec: what the runtime reads --------===//
//
// Everything the runtime reads of a program besides its steps, decided here
// and recorded in one dtcrt.spec op (DtcrtSpec.td) that the printers print
// as they find it: the initializers' fans, the sizes of the persistent block
// and the arena (the largest of the steps', with the alignment room), the
// bucket plan, the classes, ignore index and id limit the loss and the
// embeddings take, the predictions' width, and the recipe and optimizer
// with the dialect's enums mapped to the runtime's.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Steps.h"
#include "passes/lowering/Lowering.h"

using namespace mlir;
using namespace dtc;
using namespace dtc::lowering;

namespace {
/// A lowered i64 operand's value (a dtcrt.constant or dtcrt.size).
int64_t constantOf(Value v) {
  if (auto c = v.getDefiningOp<dtcrt::ConstantOp>())
    return cast<IntegerAttr>(c.getValue()).getInt();
  if (auto s = v.getDefiningOp<dtcrt::SizeOp>())
    return s.getElements();
  return 0;
}

dtcrt::ElementType elementType(Type t) {
  return t.isInteger(64)   ? dtcrt::ElementType::I64
         : t.isInteger(32) ? dtcrt::ElementType::I32
                           : dtcrt::ElementType::F32;
}

/// The dialect's enums as the runtime's.
dtcrt::InitKind runtimeInit(InitKind k) {
  switch (k) {
  case InitKind::Zeros:
    return dtcrt::InitKind::Zeros;
  case InitKind::Constant:
    return dtcrt::InitKind::Constant;
  case InitKind::Uniform:
    return dtcrt::InitKind::Uniform;
  case InitKind::Normal:
    return dtcrt::InitKind::Normal;
  case InitKind::GlorotUniform:
    return dtcrt::InitKind::GlorotUniform;
  case InitKind::GlorotNormal:
    return dtcrt::InitKind::GlorotNormal;
  case InitKind::HeUniform:
    return dtcrt::InitKind::HeUniform;
  case InitKind::HeNormal:
    return dtcrt::InitKind::HeNormal;
  }
  llvm_unreachable("an initializer");
}

dtcrt::DatasetKind runtimeData(DataKind k) {
  switch (k) {
  case DataKind::None:
    return dtcrt::DatasetKind::None;
  case DataKind::IDX:
    return dtcrt::DatasetKind::IDX;
  case DataKind::CSV:
    return dtcrt::DatasetKind::CSV;
  case DataKind::Synthetic:
    return dtcrt::DatasetKind::Synthetic;
  case DataKind::Text:
    return dtcrt::DatasetKind::Text;
  }
  llvm_unreachable("a data set");
}

dtcrt::OptimizerKind runtimeOptimizer(OptimizerKind k) {
  switch (k) {
  case OptimizerKind::SGD:
    return dtcrt::OptimizerKind::SGD;
  case OptimizerKind::Adam:
    return dtcrt::OptimizerKind::Adam;
  case OptimizerKind::AdamW:
    return dtcrt::OptimizerKind::AdamW;
  }
  llvm_unreachable("an optimizer");
}

dtcrt::ScheduleKind runtimeSchedule(LrScheduleKind k) {
  switch (k) {
  case LrScheduleKind::Constant:
    return dtcrt::ScheduleKind::Constant;
  case LrScheduleKind::Cosine:
    return dtcrt::ScheduleKind::Cosine;
  case LrScheduleKind::Linear:
    return dtcrt::ScheduleKind::Linear;
  case LrScheduleKind::Step:
    return dtcrt::ScheduleKind::Step;
  }
  llvm_unreachable("a schedule");
}
} // namespace

SpecPlan dtc::lowering::planSpec(ModuleOp module) {
  DtcDialect *dtc = module->getContext()->getLoadedDialect<DtcDialect>();
  SpecPlan plan;
  auto eval = module.lookupSymbol<func::FuncOp>(steps::kEval);
  plan.evalType = eval.getFunctionType();
  plan.outputs = dtc->getOutputsAttrHelper().getAttr(eval);
  // The arena the steps share: the largest of their regions.
  for (auto f : module.getOps<func::FuncOp>())
    if (ArenaAttr arena = dtc->getArenaAttrHelper().getAttr(f)) {
      if (f.getSymName() == steps::kGrad) {
        plan.gradPerSample = arena.getPerSample();
        plan.gradFixed = arena.getFixed();
        continue;
      }
      plan.perSample = std::max(plan.perSample, arena.getPerSample());
      plan.fixed = std::max(plan.fixed, arena.getFixed());
    }
  // The bucket plan, in the order the buckets' all-reduces start.
  llvm::StringMap<int32_t> index;
  for (ParamOp p : module.getOps<ParamOp>())
    index[p.getSymName()] = index.size();
  auto train = module.lookupSymbol<func::FuncOp>(steps::kTrain);
  // (A sharded program lists its reduce-scatters only: an all-reduce there
  // sums clip_grad_norm_'s partial norms, no gradients.)
  const bool sharded = bool(shardOf(module));
  train.walk([&](Operation *op) {
    if (!(sharded ? isa<ReduceScatterStartOp>(op)
                  : isa<AllReduceBucketOp, AllReduceStartOp>(op)))
      return;
    int64_t id = op->getAttrOfType<IntegerAttr>("bucket").getInt();
    if (id < 0)
      return;
    SmallVector<int32_t> params;
    for (StringRef p : updatedParams(op))
      if (!p.empty())
        params.push_back(index.lookup(p));
    BucketPlanAttr bucket = dtc->getBucketPlanAttrHelper().getAttr(op);
    DenseI64ArrayAttr within;
    if (bucket.getShard()) {
      SmallVector<int64_t> offsets;
      for (Value g : op->getOperands()) {
        Operation *def = g.getDefiningOp();
        offsets.push_back((dtc->getOffsetsAttrHelper().getAttr(
                               def)[cast<OpResult>(g).getResultNumber()] -
                           bucket.getOffset()) /
                          4);
      }
      within = DenseI64ArrayAttr::get(module.getContext(), offsets);
    }
    plan.buckets.push_back(dtcrt::BucketSpecAttr::get(
        module.getContext(), id, bucket.getCount(),
        DenseI32ArrayAttr::get(module.getContext(), params), bucket.getShard(),
        bucket.getParamOffset().value_or(0),
        bucket.getStateOffset().value_or(0), within));
  });
  return plan;
}

dtcrt::SpecOp dtc::lowering::buildSpec(ModuleOp module, const SpecPlan &plan) {
  MLIRContext *ctx = module.getContext();
  DtcDialect *dtc = ctx->getLoadedDialect<DtcDialect>();
  Builder b(ctx);
  auto f64 = [&](double v) { return b.getF64FloatAttr(v); };

  // Parameters, with the fans torch computes for their shapes.
  // Stage 3: each parameter's byte offset in the gathered image (every
  // sharded bucket's floats, one bucket after the other), by index.
  DenseMap<int32_t, int64_t> imageOffset;
  int64_t imageBase = 0;
  for (Attribute a : plan.buckets) {
    auto bucket = cast<dtcrt::BucketSpecAttr>(a);
    if (!bucket.getWithin())
      continue;
    for (auto [i, within] : llvm::zip(bucket.getParams().asArrayRef(),
                                      bucket.getWithin().asArrayRef()))
      imageOffset[i] = imageBase + within * 4;
    imageBase += bucket.getCount() * 4;
  }
  SmallVector<Attribute> params;
  int32_t paramIndex = 0;
  for (ParamOp p : module.getOps<ParamOp>()) {
    auto t = cast<RankedTensorType>(p.getType());
    auto s = t.getShape();
    int64_t fanOut = s.empty() ? 1 : s.back();
    int64_t fanIn =
        s.empty() ? 1 : t.getNumElements() / std::max<int64_t>(fanOut, 1);
    if (s.size() == 1)
      fanIn = s[0];
    PlacementAttr at = dtc->getPlacementAttrHelper().getAttr(p);
    // (Stage 3: no place in the persistent block; the offset in the
    // gathered image, every bucket's floats one after the other.)
    int64_t offset = at ? at.getOffset() : imageOffset.lookup(paramIndex);
    ++paramIndex;
    params.push_back(dtcrt::ParamSpecAttr::get(
        ctx, p.getSymName(), b.getDenseI64ArrayAttr(s), offset,
        // (-1: sharded, its state is in its buckets' shards.)
        at ? at.getStateOffset().value_or(shardOf(module) ? -1 : 0) : -1,
        runtimeInit(p.getInit()), f64(p.getA().convertToDouble()),
        f64(p.getB().convertToDouble()), fanIn, fanOut));
  }
  SmallVector<Attribute> buffers;
  for (BufferOp buf : module.getOps<BufferOp>()) {
    auto t = cast<RankedTensorType>(buf.getType());
    buffers.push_back(dtcrt::BufferSpecAttr::get(
        ctx, buf.getSymName(), elementType(t.getElementType()),
        b.getDenseI64ArrayAttr(t.getShape()),
        dtc->getPlacementAttrHelper().getAttr(buf).getOffset(),
        f64(buf.getValue().convertToDouble())));
  }

  // What the loss, the metrics and the embeddings of the lowered evaluation
  // step take: the classes and the ignore index, the rows of the smallest
  // table the input's ids index, and the width of exported predictions.
  auto eval = module.lookupSymbol<func::FuncOp>(steps::kEval);
  int64_t numClasses = 0, ignoreIndex = -100, idLimit = 0, predictWidth = 0;
  eval.walk([&](Operation *op) {
    if (auto c = dyn_cast<dtcrt::CrossEntropyOp>(op)) {
      numClasses = constantOf(c.getClasses());
      ignoreIndex = constantOf(c.getIgnoreIndex());
    }
    if (auto c = dyn_cast<dtcrt::AccuracyOp>(op)) {
      numClasses = constantOf(c.getClasses());
      ignoreIndex = constantOf(c.getIgnoreIndex());
    }
    if (auto e = dyn_cast<dtcrt::EmbeddingOp>(op)) {
      auto arg = e.getIds().getDefiningOp<dtcrt::StepArgOp>();
      if (arg && arg.getArg() == dtcrt::StepArg::InputIds) {
        const int64_t num = constantOf(e.getNum());
        idLimit = idLimit ? std::min(idLimit, num) : num;
      }
    }
    if (auto e = dyn_cast<dtcrt::ExportPredictionOp>(op))
      if (auto n = e.getN().getDefiningOp<dtcrt::SizeOp>())
        predictWidth = n.getElements();
  });
  auto xt = cast<RankedTensorType>(plan.evalType.getInput(0));
  auto yt = cast<RankedTensorType>(plan.evalType.getInput(1));
  auto input = dtcrt::InputAttr::get(
      ctx, b.getDenseI64ArrayAttr(xt.getShape().drop_front()),
      shape::numElementsPerBatch(xt), elementType(xt.getElementType()),
      idLimit);
  auto labels = dtcrt::LabelsAttr::get(
      ctx,
      yt.getElementType().isInteger(32) ? dtcrt::LabelKind::Class
                                        : dtcrt::LabelKind::Value,
      shape::numElementsPerBatch(yt), numClasses, ignoreIndex);

  OptimizerAttr opt = optimizerOf(module);
  PersistentAttr persistent = dtc->getPersistentAttrHelper().getAttr(module);
  // The per-sample region starts aligned after the fixed one.
  auto memory = dtcrt::MemoryAttr::get(
      ctx, persistent.getBytes(), persistent.getParamBytes(),
      persistent.getBufferBytes(), opt.numStateBuffers(), plan.perSample,
      plan.fixed + kDefaultAlignment, plan.gradPerSample,
      plan.gradFixed + kDefaultAlignment);

  RecipeAttr r = dtc->getRecipeAttrHelper().getAttr(module);
  auto accumulate = dtc->getAccumulateAttrHelper().getAttr(module);
  auto recipe = dtcrt::RecipeAttr::get(
      ctx, runtimeData(r.getData()), r.getDir(), r.getTrain(), r.getTest(),
      r.getTrainSize(), r.getTestSize(), r.getBatch(), r.getEpochs(),
      r.getSeed(), f64(r.getValidation()),
      accumulate ? accumulate.getInt() : 1);
  FloatAttr clip = dtc->getClipGradNormAttrHelper().getAttr(module);
  auto hyper = dtcrt::HyperAttr::get(
      ctx, runtimeOptimizer(opt.getKind()), f64(opt.getLr()),
      f64(opt.getMomentum()), f64(opt.getDampening()),
      f64(opt.getWeightDecay()), f64(opt.getBeta1()), f64(opt.getBeta2()),
      f64(opt.getEps()), opt.getNesterov(),
      clip ? f64(clip.getValueAsDouble()) : FloatAttr());
  dtcrt::ScheduleAttr schedule;
  if (ScheduleAttr s = dtc->getScheduleAttrHelper().getAttr(module))
    schedule = dtcrt::ScheduleAttr::get(
        ctx, runtimeSchedule(s.getKind()), s.getWarmup(), s.getDecaySteps(),
        f64(s.getMinLr()), s.getStepSize(), f64(s.getGamma()));

  dtcrt::PredictionAttr prediction;
  if (PredictionAttr p = dtc->getPredictionAttrHelper().getAttr(module))
    prediction = dtcrt::PredictionAttr::get(
        ctx, f64(p.getStepSeconds()), f64(p.getComputeSeconds()),
        p.getPeakBytes(), p.getRanks(), p.getBatch(), p.getBudget(),
        f64(p.getReferenceSeconds()));

  auto str = [](StringAttr a) { return a ? a.getValue() : StringRef(); };
  OpBuilder top = OpBuilder::atBlockBegin(module.getBody());
  return dtcrt::SpecOp::create(
      top, module.getLoc(),
      targetOf(module) == Target::Cuda ? dtcrt::Target::Cuda
                                       : dtcrt::Target::Cpu,
      str(dtc->getModelAttrHelper().getAttr(module)),
      str(dtc->getSourceAttrHelper().getAttr(module)), input, labels,
      b.getArrayAttr(params), b.getArrayAttr(buffers),
      b.getArrayAttr(plan.buckets), memory,
      plan.outputs ? plan.outputs : b.getArrayAttr({}), predictWidth, recipe,
      hyper, schedule,
      shardOf(module)
          ? dtcrt::ShardAttr::get(ctx, int64_t(shardOf(module).getStage()),
                                  shardOf(module).getRanks())
          : dtcrt::ShardAttr(),
      dtc->getModelDigestAttrHelper().getAttr(module), prediction);
}
