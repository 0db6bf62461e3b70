//===- Planner.cpp - The training plan that fits a memory budget ----------===//
#include "passes/Planner.h"
#include "passes/PlanReport.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace dtc;

namespace {
const char *stageName(ShardStage stage) {
  switch (stage) {
  case ShardStage::None:
    return "replicated";
  case ShardStage::Optimizer:
    return "1 optimizer";
  case ShardStage::Gradients:
    return "2 gradients";
  case ShardStage::Parameters:
    return "3 parameters";
  }
  return "?";
}

/// The samples a rank trains on per step (the recipe's batch times its
/// accumulation).
std::pair<int64_t, int64_t> recipeBatch(ModuleOp module) {
  auto *dtc = module->getContext()->getLoadedDialect<DtcDialect>();
  RecipeAttr recipe = dtc->getRecipeAttrHelper().getAttr(module);
  IntegerAttr acc = dtc->getAccumulateAttrHelper().getAttr(module);
  return {recipe ? recipe.getBatch() : 64, acc ? acc.getInt() : 1};
}

bool hasBlocks(ModuleOp module) {
  auto *dtc = module->getContext()->getLoadedDialect<DtcDialect>();
  bool found = false;
  module.walk([&](Operation *op) {
    if (dtc->getBlockAttrHelper().isAttrPresent(op))
      found = true;
    return found ? WalkResult::interrupt() : WalkResult::advance();
  });
  return found;
}

/// `plan` compiled from a copy of `frontEnd`, and its prediction.
void evaluate(ModuleOp frontEnd, const PipelineOptions &options,
              const PlanRequest &request, Plan &plan) {
  MLIRContext *ctx = frontEnd.getContext();
  OwningOpRef<ModuleOp> m = frontEnd.clone();
  PipelineOptions o;
  o.copyOptionValuesFrom(options);
  applyPlan(*m, o, plan, request.ranks);
  PassManager pm(ctx);
  buildPipeline(pm, o);
  ScopedDiagnosticHandler quiet(ctx, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error && plan.error.empty())
      plan.error = d.str();
    return success();
  });
  if (failed(pm.run(*m))) {
    if (plan.error.empty())
      plan.error = "the pipeline failed";
    return;
  }
  plan.prediction = predict(*m, request.machine, request.ranks);
}
} // namespace

std::string Plan::describe() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "stage " << stageName(stage) << ", remat " << remat << ", batch "
     << batch;
  if (accumulate > 1)
    os << " x " << accumulate << " micro-batches";
  os << ", buckets " << formatBytes(bucketBytes);
  return s;
}

void dtc::applyPlan(ModuleOp module, PipelineOptions &options, const Plan &plan,
                    int64_t ranks) {
  MLIRContext *ctx = module.getContext();
  auto *dtc = ctx->getLoadedDialect<DtcDialect>();
  dtc->getShardAttrHelper().setAttr(module,
                                    ShardAttr::get(ctx, plan.stage, ranks));
  if (RecipeAttr r = dtc->getRecipeAttrHelper().getAttr(module))
    dtc->getRecipeAttrHelper().setAttr(
        module,
        RecipeAttr::get(ctx, r.getData(), r.getDir(), r.getTrain(), r.getTest(),
                        r.getTrainSize(), r.getTestSize(), plan.batch,
                        r.getEpochs(), r.getSeed(), r.getValidation()));
  if (plan.accumulate > 1)
    dtc->getAccumulateAttrHelper().setAttr(
        module, IntegerAttr::get(IntegerType::get(ctx, 64), plan.accumulate));
  else
    dtc->getAccumulateAttrHelper().removeAttr(module);
  options.remat = plan.remat;
  options.bucketBytes = plan.bucketBytes;
}

FailureOr<Plan> dtc::choosePlan(ModuleOp frontEnd,
                                const PipelineOptions &options,
                                const PlanRequest &request,
                                llvm::raw_ostream *report, std::string *error) {
  SmallVector<ShardStage> stages;
  if (request.stage)
    stages.push_back(*request.stage);
  else if (request.ranks > 1)
    stages = {ShardStage::None, ShardStage::Optimizer, ShardStage::Gradients,
              ShardStage::Parameters};
  else
    stages.push_back(ShardStage::None);
  SmallVector<std::string> remats;
  if (request.remat)
    remats.push_back(*request.remat);
  else {
    remats = {"none", "selective"};
    if (hasBlocks(frontEnd))
      remats.push_back("blocks");
  }
  // Micro-batches of the same samples a rank and step: halved while they
  // divide it, down to an eighth.
  auto [batch, accumulate] = recipeBatch(frontEnd);
  const int64_t samples = batch * accumulate;
  SmallVector<std::pair<int64_t, int64_t>> batches;
  if (request.fixedBatch)
    batches.push_back({batch, accumulate});
  else
    for (int64_t k = 1; k <= 8 && samples % k == 0; k *= 2)
      batches.push_back({samples / k, k});
  const int64_t bucket =
      request.bucketBytes.value_or(int64_t(options.bucketBytes.getValue()));

  SmallVector<Plan> plans;
  for (ShardStage stage : stages)
    for (const std::string &remat : remats)
      for (auto [micro, k] : batches) {
        Plan p;
        p.stage = stage;
        p.remat = remat;
        p.batch = micro;
        p.accumulate = k;
        p.bucketBytes = bucket;
        evaluate(frontEnd, options, request, p);
        plans.push_back(std::move(p));
      }
  // What a plan's prediction may reach: the budget less the headroom.
  const int64_t usable =
      int64_t(double(request.budget) * (1.0 - kPlanHeadroom));
  auto need = [&](const Plan &p) {
    return p.prediction.peakBytes + request.dataBytes;
  };
  auto fits = [&](const Plan &p) {
    return p.error.empty() && (request.budget <= 0 || need(p) <= usable);
  };
  // The fastest plan that fits of those `among` takes (of equal ones, the
  // first above).
  auto choose = [&](function_ref<bool(const Plan &)> among) -> const Plan * {
    const Plan *fastest = nullptr;
    for (const Plan &p : plans)
      if (among(p) && fits(p) &&
          (!fastest ||
           p.prediction.stepSeconds < fastest->prediction.stepSeconds))
        fastest = &p;
    return fastest;
  };
  const Plan *best = choose([](const Plan &) { return true; });
  // Bucket sizes, for the plan chosen: a quarter and four times as large.
  if (best && !request.bucketBytes) {
    Plan base = *best;
    for (int64_t bytes : {bucket / 4, bucket * 4}) {
      Plan p = base;
      p.bucketBytes = bytes;
      p.prediction = Prediction();
      evaluate(frontEnd, options, request, p);
      plans.push_back(std::move(p));
    }
    best = choose([&](const Plan &p) {
      return p.stage == base.stage && p.remat == base.remat &&
             p.batch == base.batch;
    });
  }
  const int64_t fitting = llvm::count_if(plans, fits);

  if (report) {
    auto &os = *report;
    os << "plans for " << request.ranks << " rank"
       << (request.ranks == 1 ? "" : "s");
    if (request.budget > 0)
      os << " within " << formatBytes(request.budget) << " a rank ("
         << formatBytes(usable) << " predicted, "
         << int(kPlanHeadroom * 100 + 0.5) << "% kept as headroom)";
    os << " (machine: " << request.machine.source << "; predicted step time "
       << "and a rank's peak memory, with the data set's "
       << formatBytes(request.dataBytes) << "), fastest first:\n";
    os << llvm::format("  %-13s %-10s %-16s %-9s %10s %10s %10s  %s\n", "stage",
                       "remat", "batch", "buckets", "step", "of which", "peak",
                       "");
    os << llvm::format("  %-13s %-10s %-16s %-9s %10s %10s %10s\n", "", "", "",
                       "", "", "waiting", "");
    SmallVector<const Plan *> order;
    for (const Plan &p : plans)
      order.push_back(&p);
    llvm::stable_sort(order, [](const Plan *a, const Plan *b) {
      if (a->error.empty() != b->error.empty())
        return a->error.empty();
      return a->prediction.stepSeconds < b->prediction.stepSeconds;
    });
    for (const Plan *p : order) {
      std::string micro = std::to_string(p->batch);
      if (p->accumulate > 1)
        micro += " x " + std::to_string(p->accumulate);
      if (!p->error.empty()) {
        os << llvm::format("  %-13s %-10s %-16s %-9s  cannot be planned: %s\n",
                           stageName(p->stage), p->remat.c_str(), micro.c_str(),
                           formatBytes(p->bucketBytes).c_str(),
                           p->error.c_str());
        continue;
      }
      std::string note = p == best ? "<- chosen" : "";
      if (request.budget > 0 && !fits(*p))
        note = "over by " + formatBytes(need(*p) - usable);
      os << llvm::format("  %-13s %-10s %-16s %-9s %10s %10s %10s  %s\n",
                         stageName(p->stage), p->remat.c_str(), micro.c_str(),
                         formatBytes(p->bucketBytes).c_str(),
                         formatSeconds(p->prediction.stepSeconds).c_str(),
                         formatSeconds(p->prediction.commSeconds).c_str(),
                         formatBytes(need(*p)).c_str(), note.c_str());
    }
    if (best)
      os << "chosen: " << best->describe() << ": the fastest of " << fitting
         << " plan" << (fitting == 1 ? "" : "s")
         << (request.budget > 0 ? " that fit" : "") << " (" << plans.size()
         << " considered), predicted "
         << formatSeconds(best->prediction.stepSeconds) << " a step and "
         << formatBytes(need(*best)) << " a rank\n";
  }
  if (best)
    return *best;
  // Nothing fits: the smallest plan, against the budget.
  const Plan *smallest = nullptr;
  for (const Plan &p : plans)
    if (p.error.empty() && (!smallest || need(p) < need(*smallest)))
      smallest = &p;
  std::string message;
  llvm::raw_string_ostream diag(message);
  if (!smallest) {
    diag << "no plan of " << plans.size()
         << " can be compiled: " << plans.front().error;
    if (error)
      *error = message;
    return failure();
  }
  diag << "no plan fits " << formatBytes(request.budget) << " a rank ("
       << formatBytes(usable) << " predicted, "
       << int(kPlanHeadroom * 100 + 0.5) << "% kept as headroom) on "
       << request.ranks << " rank" << (request.ranks == 1 ? "" : "s")
       << ": the smallest of " << plans.size() << " (" << smallest->describe()
       << ") needs " << formatBytes(need(*smallest)) << " (predicted, with the "
       << "data set's " << formatBytes(request.dataBytes) << "; "
       << need(*smallest) << " bytes against " << usable
       << "); give more ranks, a smaller batch or a larger budget";
  if (error)
    *error = message;
  return failure();
}
