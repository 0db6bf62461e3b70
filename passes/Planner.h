//===- Planner.h - The training plan that fits a memory budget ------------===//
//
// dtc chooses how a model is trained on N ranks: the sharding stage, the
// recomputation policy, the micro-batch (with gradient accumulation at the
// same samples a rank and step) and the gradient bucket size. Each plan is
// compiled through the pipeline, and the cost model (CostModel.h) predicts
// its step time and a rank's peak memory; the fastest plan whose peak fits
// the budget wins (docs/passes.md, "Choosing the plan").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/CostModel.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>

namespace dtc {

/// The share of a budget a plan's predicted peak may not use: what the
/// prediction does not see (the allocator's retained memory, the GEMM
/// engine's kernels and caches, the collective library's buffers) has
/// measured up to 10% above it (benchmarks/plan_demo.sh).
constexpr double kPlanHeadroom = 0.10;

/// One way to train the model.
struct Plan {
  ShardStage stage = ShardStage::None;
  std::string remat = "none";
  int64_t batch = 0;      // samples a micro-batch, on each rank
  int64_t accumulate = 1; // micro-batches a step
  int64_t bucketBytes = kDefaultBucketBytes;
  Prediction prediction;
  std::string error; // why it cannot be compiled ("": it can)
  /// "stage 2 (gradients), remat blocks, batch 8 x 4, buckets 25 MiB".
  std::string describe() const;
};

/// What the plan is chosen for, and what is fixed already.
struct PlanRequest {
  int64_t ranks = 1;
  int64_t budget = 0; // bytes a rank (0: none: the fastest plan)
  /// The data set's bytes a rank holds besides the plan's peak (the
  /// driver's estimate from the recipe), counted against the budget.
  int64_t dataBytes = 0;
  Machine machine;
  /// Fixed by the user (else searched).
  std::optional<ShardStage> stage;
  std::optional<std::string> remat;
  std::optional<int64_t> bucketBytes;
  bool fixedBatch = false;
};

/// Plans every combination the request leaves open for `frontEnd` (a
/// module from the front end, with its dtc.target), each compiled with
/// `options`; with `report`, prints them (the fastest first), the chosen one
/// and why. Returns the fastest plan that fits, or failure when none does,
/// with in `error` the smallest plan's bytes against the budget.
mlir::FailureOr<Plan> choosePlan(mlir::ModuleOp frontEnd,
                                 const PipelineOptions &options,
                                 const PlanRequest &request,
                                 llvm::raw_ostream *report, std::string *error);

/// Sets `plan` on a front-end module and its pipeline options: the
/// module's dtc.shard, its recipe's batch and dtc.accumulate; the options'
/// remat and bucket size.
void applyPlan(mlir::ModuleOp module, PipelineOptions &options,
               const Plan &plan, int64_t ranks);

} // namespace dtc
