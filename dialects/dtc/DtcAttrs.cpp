//===- DtcAttrs.cpp - dtc attributes: verifiers, printing, placement ------===//
#include "dialects/dtc/DtcDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace dtc;

#include "dialects/dtc/DtcEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "dialects/dtc/DtcAttrs.cpp.inc"

void DtcDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/dtc/DtcAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Parameter parsing and printing
//===----------------------------------------------------------------------===//

FailureOr<F64> dtc::parseF64(AsmParser &parser) {
  double v;
  if (parser.parseFloat(v))
    return failure();
  return F64(v);
}

std::string dtc::f64Text(double value) {
  // The shortest of %.1g ... %.17g that reads back to the same double.
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, value);
    if (std::strtod(buf, nullptr) == value)
      break;
  }
  // A float literal to MLIR's parser has a '.': "1" or "1e-06" would not be.
  std::string text = buf;
  if (std::isfinite(value) && text.find('.') == std::string::npos) {
    size_t e = text.find('e');
    text.insert(e == std::string::npos ? text.size() : e, ".0");
  }
  return text;
}

void dtc::printF64(AsmPrinter &printer, double value) {
  printer << f64Text(value);
}

FailureOr<bool> dtc::parseBool(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(),
                          "expected true or false");
}

//===----------------------------------------------------------------------===//
// The optimizer and the recipe
//===----------------------------------------------------------------------===//

Target dtc::targetOf(ModuleOp module) {
  auto *dialect = module->getContext()->getLoadedDialect<DtcDialect>();
  TargetAttr target =
      dialect ? dialect->getTargetAttrHelper().getAttr(module) : TargetAttr();
  return target ? target.getValue() : Target::Cpu;
}

OptimizerAttr dtc::defaultOptimizer(MLIRContext *context, OptimizerKind kind) {
  bool sgd = kind == OptimizerKind::SGD;
  return OptimizerAttr::get(context, kind, /*lr=*/sgd ? 0.01 : 0.001,
                            /*weight_decay=*/kind == OptimizerKind::AdamW ? 0.01
                                                                          : 0.0,
                            /*momentum=*/0.0, /*dampening=*/0.0,
                            /*nesterov=*/false, /*beta1=*/0.9, /*beta2=*/0.999,
                            /*eps=*/1e-8);
}

LogicalResult
OptimizerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      OptimizerKind kind, F64 lr, F64 weightDecay, F64 momentum,
                      F64 dampening, bool nesterov, F64 beta1, F64 beta2,
                      F64 eps) {
  auto bad = [&](StringRef what, double v, StringRef range) {
    return emitError() << "invalid value " << f64Text(v) << " for " << what
                       << " (expected " << range << ")";
  };
  for (double v : {lr.value, weightDecay.value, momentum.value, dampening.value,
                   beta1.value, beta2.value, eps.value})
    if (!std::isfinite(v))
      return emitError() << "optimizer hyper-parameters must be finite";
  if (!(lr > 0))
    return bad("lr", lr, "> 0");
  if (weightDecay < 0)
    return bad("weight_decay", weightDecay, ">= 0");
  if (momentum < 0 || momentum >= 1)
    return bad("momentum", momentum, "in [0, 1)");
  if (dampening < 0 || dampening > 1)
    return bad("dampening", dampening, "in [0, 1]");
  if (beta1 < 0 || beta1 >= 1)
    return bad("beta1", beta1, "in [0, 1)");
  if (beta2 < 0 || beta2 >= 1)
    return bad("beta2", beta2, "in [0, 1)");
  if (!(eps > 0))
    return bad("eps", eps, "> 0");
  bool sgd = kind == OptimizerKind::SGD;
  if (sgd && (beta1.value != 0.9 || beta2.value != 0.999 || eps.value != 1e-8))
    return emitError() << "beta1, beta2 and eps are Adam's, not sgd's";
  if (!sgd && (momentum.value != 0 || dampening.value != 0 || nesterov))
    return emitError() << "momentum, dampening and nesterov are sgd's, not "
                       << stringifyOptimizerKind(kind) << "'s";
  if (nesterov && (momentum.value <= 0 || dampening.value != 0))
    return emitError() << "nesterov needs momentum > 0 and dampening = 0";
  return success();
}

int OptimizerAttr::numStateBuffers() const {
  if (getKind() != OptimizerKind::SGD)
    return 2;
  return getMomentum().value != 0.0 ? 1 : 0;
}

bool OptimizerAttr::isFoldableMomentum() const {
  return getKind() == OptimizerKind::SGD && getMomentum().value != 0.0 &&
         getDampening().value == 0.0 && getWeightDecay().value == 0.0 &&
         !getNesterov();
}

LogicalResult ScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   LrScheduleKind kind, int64_t warmup,
                                   int64_t decaySteps, F64 minLr,
                                   int64_t stepSize, F64 gamma) {
  if (warmup < 0 || decaySteps < 0)
    return emitError() << "warmup and decay_steps must be >= 0";
  // The decay ends at step decay_steps (0: the run's last step), not
  // before the warmup does (train --decay-steps refuses the same).
  if ((kind == LrScheduleKind::Cosine || kind == LrScheduleKind::Linear) &&
      decaySteps > 0 && decaySteps < warmup)
    return emitError() << "decay_steps " << decaySteps
                       << " is shorter than warmup " << warmup
                       << ": the decay would be over before the warmup ends, "
                          "the rate dropping to min_lr at once after it; give "
                          "decay_steps of at least "
                       << warmup << ", or 0 for the run's last step";
  if (!(double(minLr) >= 0))
    return emitError() << "min_lr must be >= 0, got " << double(minLr);
  if (stepSize < 1)
    return emitError() << "step_size must be >= 1, got " << stepSize;
  if (!(double(gamma) >= 0 && double(gamma) <= 1))
    return emitError() << "gamma must be in [0, 1], got " << double(gamma);
  return success();
}

LogicalResult RecipeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 DataKind data, StringRef dir, StringRef train,
                                 StringRef test, int64_t trainSize,
                                 int64_t testSize, int64_t batch,
                                 int64_t epochs, int64_t seed, F64 validation) {
  if (!(validation >= 0.0 && validation < 1.0))
    return emitError() << "validation is a fraction in [0, 1), got "
                       << double(validation);
  if (batch < 1)
    return emitError() << "the batch must be >= 1, got " << batch;
  if (epochs < 0)
    return emitError() << "epochs must be >= 0, got " << epochs;
  if (seed < 0)
    return emitError() << "the seed must be >= 0, got " << seed;
  if (trainSize < 0 || testSize < 0)
    return emitError() << "data set sizes must be >= 0";
  if ((data == DataKind::IDX) != !dir.empty())
    return emitError() << "'dir' belongs to idx data, which needs it";
  const bool files = data == DataKind::CSV || data == DataKind::Text;
  if (files ? train.empty() : !train.empty() || !test.empty())
    return emitError() << "'train' and 'test' files belong to csv and text "
                          "data, which need 'train'";
  if (data == DataKind::Text && !test.empty())
    return emitError() << "text data has no 'test' file (it holds out its end)";
  if (data == DataKind::Synthetic ? trainSize < 1 : trainSize || testSize)
    return emitError() << "'train_size' and 'test_size' belong to synthetic "
                          "data, which needs train_size >= 1";
  return success();
}

//===----------------------------------------------------------------------===//
// The plan
//===----------------------------------------------------------------------===//

static LogicalResult
nonNegative(function_ref<InFlightDiagnostic()> emitError, StringRef attr,
            ArrayRef<std::pair<StringRef, int64_t>> fields) {
  for (auto [name, v] : fields)
    if (v < 0)
      return emitError() << "#dtc." << attr << ": " << name
                         << " must be >= 0, got " << v;
  return success();
}

LogicalResult ArenaAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t perSample, int64_t fixed,
                                int64_t naivePerSample, int64_t naiveFixed) {
  return nonNegative(emitError, "arena",
                     {{"per_sample", perSample},
                      {"fixed", fixed},
                      {"naive_per_sample", naivePerSample},
                      {"naive_fixed", naiveFixed}});
}

LogicalResult
PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      int64_t offset, std::optional<int64_t> stateOffset) {
  return nonNegative(
      emitError, "placement",
      {{"offset", offset}, {"state_offset", stateOffset.value_or(0)}});
}

LogicalResult
PersistentAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       int64_t paramBytes, int64_t bufferBytes, int64_t bytes) {
  if (failed(nonNegative(emitError, "persistent",
                         {{"param_bytes", paramBytes},
                          {"buffer_bytes", bufferBytes},
                          {"bytes", bytes}})))
    return failure();
  if (bytes < paramBytes)
    return emitError() << "#dtc.persistent: the block (" << bytes
                       << " bytes) is smaller than its parameters ("
                       << paramBytes << ")";
  if (bytes < paramBytes + bufferBytes)
    return emitError() << "#dtc.persistent: the block (" << bytes
                       << " bytes) is smaller than its parameters and buffers ("
                       << paramBytes + bufferBytes << ")";
  return success();
}

LogicalResult BucketPlanAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t offset, int64_t count,
    std::optional<int64_t> momentumOffset, std::optional<int64_t> shard,
    std::optional<int64_t> paramOffset, std::optional<int64_t> stateOffset) {
  if (count < 1)
    return emitError() << "#dtc.bucket_plan: count must be >= 1, got " << count;
  if (shard && (*shard < 1 || count % *shard))
    return emitError() << "#dtc.bucket_plan: a shard of " << *shard
                       << " floats does not divide the bucket's " << count;
  if ((paramOffset || stateOffset) && !shard)
    return emitError() << "#dtc.bucket_plan: param_offset and state_offset "
                          "belong to a sharded bucket (with shard)";
  if (shard && momentumOffset)
    return emitError() << "#dtc.bucket_plan: a sharded bucket has no folded "
                          "momentum";
  return nonNegative(emitError, "bucket_plan",
                     {{"offset", offset},
                      {"momentum_offset", momentumOffset.value_or(0)},
                      {"param_offset", paramOffset.value_or(0)},
                      {"state_offset", stateOffset.value_or(0)}});
}

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                ShardStage stage, int64_t ranks) {
  // (0: not given yet, the front end's when the recipe names no ranks;
  // dtc-shard-weight-update needs them.)
  if (ranks < 0)
    return emitError() << "#dtc.shard: ranks must be >= 0, got " << ranks;
  (void)stage;
  return success();
}

//===----------------------------------------------------------------------===//
// Where each dtc.* attribute may stand
//===----------------------------------------------------------------------===//

LogicalResult
PredictionAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       F64 stepSeconds, F64 computeSeconds, F64 commSeconds,
                       int64_t peakBytes, int64_t ranks, int64_t batch,
                       int64_t budget, F64 referenceSeconds) {
  for (auto [what, v] :
       {std::pair<const char *, double>{"step_seconds", stepSeconds},
        {"compute_seconds", computeSeconds},
        {"comm_seconds", commSeconds},
        {"reference_seconds", referenceSeconds}})
    if (!(v >= 0) || !std::isfinite(v))
      return emitError() << "#dtc.prediction: " << what
                         << " must be finite and >= 0, got " << v;
  if (failed(nonNegative(emitError, "prediction",
                         {{"peak_bytes", peakBytes}, {"budget", budget}})))
    return failure();
  if (ranks < 1 || batch < 1)
    return emitError() << "#dtc.prediction: ranks and batch must be >= 1";
  return success();
}

LogicalResult DtcDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().strref();
  Attribute value = attr.getValue();
  // The attribute's declared type, and the kind of op it belongs on.
  auto expect = [&](bool typeOk, bool placeOk, StringRef type,
                    StringRef place) -> LogicalResult {
    if (!typeOk)
      return op->emitError()
             << "'" << name << "' must be " << type << ", got " << value;
    if (!placeOk)
      return op->emitError() << "'" << name << "' belongs on " << place
                             << ", not on '" << op->getName() << "'";
    return success();
  };
  // An array of i64 with one entry (`entries`) per result of op; null
  // after the error.
  auto perResult = [&](bool placeOk, StringRef place,
                       StringRef entries) -> DenseI64ArrayAttr {
    auto array = dyn_cast<DenseI64ArrayAttr>(value);
    if (failed(expect(bool(array), placeOk, "an array of i64", place)))
      return {};
    if (array.size() != (int64_t)op->getNumResults()) {
      op->emitError() << "'" << name << "' has " << array.size() << " "
                      << entries << " for " << op->getNumResults()
                      << " results";
      return {};
    }
    return array;
  };
  bool onModule = isa<ModuleOp>(op), onFunc = isa<func::FuncOp>(op);
  if (name == getTargetAttrHelper().getName())
    return expect(isa<TargetAttr>(value), onModule, "#dtc.target",
                  "the module");
  if (name ==
      getBlockAttrHelper().getName()) // the block instance an op computes
    return expect(isa<StringAttr>(value) && !cast<StringAttr>(value).empty(),
                  !onModule && !onFunc, "a non-empty string",
                  "an op of a step");
  if (name == getShardAttrHelper().getName())
    return expect(isa<ShardAttr>(value), onModule, "#dtc.shard", "the module");
  if (name == getCheckpointAttrHelper().getName()) { // checkpoint(...)
    auto array = dyn_cast<ArrayAttr>(value);
    return expect(array && llvm::all_of(array,
                                        [](Attribute a) {
                                          auto s = dyn_cast<StringAttr>(a);
                                          return s && !s.empty();
                                        }),
                  onModule, "an array of block instance names", "the module");
  }
  if (name == getPredictionAttrHelper().getName())
    return expect(isa<PredictionAttr>(value), onModule, "#dtc.prediction",
                  "the module");
  if (name == getRecipeAttrHelper().getName())
    return expect(isa<RecipeAttr>(value), onModule, "#dtc.recipe",
                  "the module");
  if (name == getOptimizerAttrHelper().getName())
    return expect(isa<OptimizerAttr>(value), onModule, "#dtc.optimizer",
                  "the module");
  if (name == getScheduleAttrHelper().getName())
    return expect(isa<ScheduleAttr>(value), onModule, "#dtc.schedule",
                  "the module");
  if (name == getClipGradNormAttrHelper().getName()) {
    auto f = dyn_cast<FloatAttr>(value);
    if (failed(expect(bool(f), onModule, "a float", "the module")))
      return failure();
    if (!(f.getValueAsDouble() > 0) || !std::isfinite(f.getValueAsDouble()))
      return op->emitError() << "'" << name << "' must be finite and > 0, got "
                             << f.getValueAsDouble();
    return success();
  }
  if (name == getAccumulateAttrHelper().getName()) {
    auto k = dyn_cast<IntegerAttr>(value);
    if (failed(expect(bool(k), onModule, "an integer", "the module")))
      return failure();
    if (k.getInt() < 2)
      return op->emitError()
             << "'" << name
             << "' is the micro-batches per optimizer step, >= 2, got "
             << k.getInt();
    return success();
  }
  if (name == getModelDigestAttrHelper().getName()) {
    auto d = dyn_cast<IntegerAttr>(value);
    return expect(d && d.getType().isInteger(64), onModule, "an i64",
                  "the module");
  }
  if (name == getModelAttrHelper().getName() ||
      name == getSourceAttrHelper().getName())
    return expect(isa<StringAttr>(value), onModule, "a string", "the module");
  if (name == getPersistentAttrHelper().getName())
    return expect(isa<PersistentAttr>(value), onModule, "#dtc.persistent",
                  "the module");
  if (name == getArenaAttrHelper().getName())
    return expect(isa<ArenaAttr>(value), onFunc, "#dtc.arena",
                  "a step function");
  if (name == getOutputsAttrHelper().getName()) {
    auto names = dyn_cast<ArrayAttr>(value);
    bool strings = names && llvm::all_of(names, [](Attribute a) {
                     return isa<StringAttr>(a);
                   });
    if (failed(
            expect(strings, onFunc, "an array of strings", "a step function")))
      return failure();
    auto f = cast<func::FuncOp>(op);
    // (A step lowered to runtime calls writes its outputs and returns none.)
    if (f.getNumResults() && names.size() != f.getNumResults())
      return op->emitError() << "'" << name << "' names " << names.size()
                             << " outputs of a function with "
                             << f.getNumResults() << " results";
    return success();
  }
  if (name == getTracedAttrHelper().getName())
    return expect(isa<UnitAttr>(value), onFunc, "a unit attribute",
                  "a step function");
  if (name == getInPlaceAttrHelper().getName()) {
    auto fused = dyn_cast<FusedOp>(op);
    DenseI64ArrayAttr inputs = perResult(bool(fused), "a dtc.fused", "entries");
    if (!inputs)
      return failure();
    llvm::SmallDenseSet<int64_t> seen;
    for (auto [j, i] : llvm::enumerate(inputs.asArrayRef())) {
      if (i == -1)
        continue;
      if (i < 0 || i >= (int64_t)fused.getInputs().size() ||
          !seen.insert(i).second ||
          fused.getInputs()[i].getType() != op->getResult(j).getType())
        return op->emitError()
               << "'" << name << "': result #" << j
               << " overwrites an input of its own type, each at most once "
                  "(its index), or none (-1); got "
               << i;
    }
    return success();
  }
  if (name == getOffsetsAttrHelper().getName()) {
    DenseI64ArrayAttr offsets =
        perResult(op->getNumResults() > 0, "an op with results", "offsets");
    if (!offsets)
      return failure();
    for (int64_t o : offsets.asArrayRef())
      if (o < -1)
        return op->emitError() << "'" << name
                               << "': offsets are >= 0, or -1 for a "
                                  "result without a buffer of its own";
    return success();
  }
  if (name == getScratchAttrHelper().getName()) {
    auto offset = dyn_cast<IntegerAttr>(value);
    if (failed(expect(offset && offset.getType().isInteger(64),
                      isa<ScratchOpInterface>(op), "an i64",
                      "an op that needs scratch memory")))
      return failure();
    if (offset.getInt() < 0)
      return op->emitError() << "'" << name << "' is a byte offset >= 0";
    return success();
  }
  if (name == getPlacementAttrHelper().getName())
    return expect(
        isa<PlacementAttr>(value),
        isa<ParamOp, BufferOp, AccumulateGradientOp, TakeAccumulatedOp>(op),
        "#dtc.placement",
        "a dtc.param, dtc.buffer, dtc.accumulate_gradient or "
        "dtc.take_accumulated");
  if (name == getBucketPlanAttrHelper().getName())
    return expect(isa<BucketPlanAttr>(value),
                  isa<AllReduceOp, AllReduceBucketOp, AllReduceStartOp,
                      ReduceScatterStartOp>(op),
                  "#dtc.bucket_plan", "a gradient collective");
  return op->emitError() << "unknown dtc attribute '" << name << "'";
}

LogicalResult DtcDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                   unsigned,
                                                   NamedAttribute attr) {
  // The DSL's name of an input (dtc.name on a step's arguments).
  if (attr.getName() == "dtc.name") {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'dtc.name' must be a string";
    return success();
  }
  return op->emitError() << "unknown dtc argument attribute '"
                         << attr.getName().getValue() << "'";
}
