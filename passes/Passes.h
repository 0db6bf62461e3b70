//===- Passes.h - dtc passes and pipelines --------------------------------===//
#pragma once

#include "dialects/dtc/DtcDialect.h"
#include "dialects/dtcrt/DtcrtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>

namespace dtc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Options of the whole compile pipeline (`dtc-pipeline` in dtc-opt).
struct PipelineOptions : public mlir::PassPipelineOptions<PipelineOptions> {
  Option<bool> autodiff{*this, "autodiff",
                        llvm::cl::desc("Derive @train_step (false: the module "
                                       "has it already)"),
                        llvm::cl::init(true)};
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("Fuse elementwise chains"),
                    llvm::cl::init(true)};
  Option<bool> allreduce{*this, "allreduce",
                         llvm::cl::desc("Average gradients over the ranks"),
                         llvm::cl::init(true)};
  Option<int64_t> bucketBytes{*this, "bucket-bytes",
                              llvm::cl::desc("Byte cap of a gradient bucket"),
                              llvm::cl::init(25 << 20)};
  Option<int64_t> firstBucketBytes{
      *this, "first-bucket-bytes",
      llvm::cl::desc("Byte cap of the first gradient bucket"),
      llvm::cl::init(1 << 20)};
  Option<bool> overlap{*this, "overlap",
                       llvm::cl::desc("Overlap all-reduces with backward"),
                       llvm::cl::init(true)};
  Option<bool> blocked{
      *this, "blocked",
      llvm::cl::desc("Plan blocked (nChw16c) activations for convolutions "
                     "(dtc-blocked-layout; dtc: the CPU target with oneDNN)"),
      llvm::cl::init(false)};
  Option<bool> fuseMaxPoolGrad{
      *this, "fuse-max-pool-grad",
      llvm::cl::desc("Fold max_pool2d_grad into batch_norm_grad "
                     "(dtc-fuse-max-pool-grad; dtc: the CPU target)"),
      llvm::cl::init(true)};
  Option<bool> channelsLast{
      *this, "channels-last",
      llvm::cl::desc("Plan NHWC activations for convolutions "
                     "(dtc-channels-last; dtc: the CPU target with oneDNN)"),
      llvm::cl::init(false)};
};

/// [channels-last or blocked-layout -> canonicalize ->] autodiff ->
/// canonicalize -> cse -> derive-steps -> insert-grad-allreduce ->
/// bucket-allreduce -> overlap-allreduce -> [fuse-max-pool-grad ->]
/// fuse-elementwise -> plan-memory
/// -> fold-momentum -> group-updates -> verify-backend-contract
void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Registers the dialects every dtc tool loads.
void registerDialects(mlir::DialectRegistry &registry);
/// Registers dtc's passes, the upstream ones the pipeline uses, and pipelines.
void registerAllPasses();

/// Checks the contract between planning and emission
/// (dtc-verify-backend-contract), with a diagnostic per violation.
mlir::LogicalResult verifyBackendContract(mlir::ModuleOp module);

/// The dtc.update_running_stats that fold a batch norm's statistics (the
/// layout passes give them its new input).
inline llvm::SmallVector<UpdateRunningStatsOp>
runningStatsUpdates(BatchNormOp bn) {
  llvm::SmallVector<UpdateRunningStatsOp> updates;
  for (mlir::Operation *user : bn.getMean().getUsers())
    if (auto u = llvm::dyn_cast<UpdateRunningStatsOp>(user))
      updates.push_back(u);
  return updates;
}

/// The module's optimizer (`dtc.optimizer`), or null.
OptimizerAttr optimizerOf(mlir::ModuleOp module);
/// Its state buffers per parameter (OptimizerAttr::numStateBuffers; 0
/// without an optimizer).
int optimizerStateBuffers(mlir::ModuleOp module);

/// A gradient bucket of @train_step (after dtc-plan-memory's arena plan):
/// its collective, its size, and each parameter with its gradient's byte
/// offset within the bucket.
struct MomentumBucket {
  mlir::Operation *op;
  int64_t bytes;
  llvm::SmallVector<std::pair<llvm::StringRef, int64_t>> members;
};
/// The persistent block's layout (dtc-plan-memory, dtc-fold-momentum): the
/// parameters in order, then the optimizer state, the momentum of each
/// `mirrored` bucket in a region laid out like the bucket (its plan's
/// momentum_offset), every other parameter's state after them. Sets each
/// dtc.placement and the module's dtc.persistent.
void layoutPersistent(mlir::ModuleOp module, int64_t alignment,
                      llvm::ArrayRef<MomentumBucket> mirrored);

} // namespace dtc
