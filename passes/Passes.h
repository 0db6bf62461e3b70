//===- Passes.h - dtc passes and pipelines --------------------------------===//
#pragma once

#include "dialects/dtc/DtcDialect.h"
#include "dialects/dtcrt/DtcrtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include <optional>

namespace dtc {

/// The defaults of the gradient buckets' caps (PyTorch DDP's bucket_cap_mb
/// and its first bucket): the one place they are written (dtc's
/// --bucket-mb, dtc-bucket-allreduce's options and the pipeline's read
/// them).
constexpr int64_t kDefaultBucketBytes = int64_t(25) << 20;
constexpr int64_t kDefaultFirstBucketBytes = int64_t(1) << 20;
/// The byte alignment of the buffers dtc-plan-memory and dtc-fold-momentum
/// place (a cache line; the runtime's arena and persistent block start at
/// that alignment).
constexpr int64_t kDefaultAlignment = 64;

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Options of the whole compile pipeline (`dtc-pipeline` in dtc-opt). What
/// depends on the target is read from the module's dtc.target, not from
/// here.
struct PipelineOptions : public mlir::PassPipelineOptions<PipelineOptions> {
  Option<bool> autodiff{*this, "autodiff",
                        llvm::cl::desc("Derive @train_step (false: the module "
                                       "has it already)"),
                        llvm::cl::init(true)};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse elementwise chains, and max-pool "
                                   "gradients into batch norm's where the "
                                   "target has the kernel"),
                    llvm::cl::init(true)};
  Option<bool> allreduce{*this, "allreduce",
                         llvm::cl::desc("Average gradients over the ranks"),
                         llvm::cl::init(true)};
  Option<int64_t> bucketBytes{*this, "bucket-bytes",
                              llvm::cl::desc("Byte cap of a gradient bucket"),
                              llvm::cl::init(kDefaultBucketBytes)};
  Option<int64_t> firstBucketBytes{
      *this, "first-bucket-bytes",
      llvm::cl::desc("Byte cap of the first gradient bucket"),
      llvm::cl::init(kDefaultFirstBucketBytes)};
  Option<bool> foldMomentum{
      *this, "fold-momentum",
      llvm::cl::desc("Fold SGD momentum into the gradient buckets where it "
                     "applies (dtc-fold-momentum)"),
      llvm::cl::init(true)};
  Option<bool> shardByBlock{
      *this, "shard-by-block",
      llvm::cl::desc("Buckets (and stage 3's gathers) by block instance "
                     "rather than by bytes"),
      llvm::cl::init(false)};
  Option<int64_t> shardPrefetch{
      *this, "shard-prefetch",
      llvm::cl::desc("Stage 3: the parameter gathers started ahead"),
      llvm::cl::init(1)};
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("Activation recomputation: none, blocks or selective "
                     "(dtc-rematerialize)"),
      llvm::cl::init("none")};
  Option<std::string> machine{
      *this, "machine",
      llvm::cl::desc("The machine the cost model predicts for (dtc-predict): "
                     "a train --calibrate file; empty: the defaults"),
      llvm::cl::init("")};
  Option<int64_t> budget{
      *this, "budget",
      llvm::cl::desc("The memory per rank the plan was chosen under (bytes; "
                     "recorded in the prediction)"),
      llvm::cl::init(0)};
  Option<bool> overlap{*this, "overlap",
                       llvm::cl::desc("Overlap all-reduces with backward "
                                      "(and, sharded, all-gathers with the "
                                      "next step's forward)"),
                       llvm::cl::init(true)};
  Option<bool> blocked{
      *this, "blocked",
      llvm::cl::desc("Plan blocked (nChw16c) activations for convolutions "
                     "(dtc-blocked-layout; the CPU target with oneDNN)"),
      llvm::cl::init(false)};
  Option<bool> channelsLast{
      *this, "channels-last",
      llvm::cl::desc("Plan NHWC activations for convolutions "
                     "(dtc-channels-last; the CPU target with oneDNN)"),
      llvm::cl::init(false)};
};

/// The compile pipeline, from the front end's module to the planned one
/// that dtc-lower-to-runtime takes: the one list of its passes and their
/// order (Pipeline.cpp). `dtc-opt --dtc-pipeline --dump-pass-pipeline`
/// prints it.
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

/// The module's sharding (`dtc.shard`), or null: replicated.
ShardAttr shardOf(mlir::ModuleOp module);

/// A gradient bucket's layout in its buffer (dtc-plan-memory's, which
/// dtc-shard-weight-update sizes its shards by): each gradient's offset in
/// floats (16-byte aligned), and the bucket's floats; sharded over `ranks`
/// (> 0), the bucket is padded to `ranks` shards of `shard` floats, a
/// multiple of 4 (16 bytes), so that every shard is aligned.
struct BucketLayout {
  llvm::SmallVector<int64_t> within;
  int64_t count = 0;
  int64_t shard = 0; // 0: not sharded
};
BucketLayout bucketLayout(mlir::TypeRange grads, int64_t ranks = 0);

/// The module's optimizer (`dtc.optimizer`), or null.
OptimizerAttr optimizerOf(mlir::ModuleOp module);
/// Its state buffers per parameter (OptimizerAttr::numStateBuffers; 0
/// without an optimizer).
int optimizerStateBuffers(mlir::ModuleOp module);

/// A gradient bucket of @train_step (after dtc-plan-memory's arena plan)
/// that a region of the persistent block mirrors (folded momentum, a
/// sharded bucket's parameters): its collective, its size, and each
/// parameter with its gradient's byte offset within the bucket.
struct MirroredBucket {
  mlir::Operation *op;
  int64_t bytes;
  llvm::SmallVector<std::pair<llvm::StringRef, int64_t>> members;
};
/// The planned bucket of `collective`, or none when a gradient has no
/// planned place inside it, feeds no single parameter's update, or updates
/// a parameter in `seen` (which it adds them to).
std::optional<MirroredBucket> mirroredBucket(mlir::Operation *collective,
                                             llvm::StringSet<> &seen);
/// The persistent block's layout (dtc-plan-memory, dtc-fold-momentum): the
/// parameters, then the buffers, then the optimizer state. Replicated: the
/// parameters in order; the momentum of each `momentum` bucket in a region
/// laid out like the bucket (its plan's momentum_offset), every other
/// parameter's state after them. Sharded (`sharded`, every parameter in
/// one): each bucket's parameters laid out like the bucket, padded to its
/// shards (its plan's param_offset), and this rank's shard of their state
/// (state_offset). Sets each dtc.placement and the module's dtc.persistent.
void layoutPersistent(mlir::ModuleOp module, int64_t alignment,
                      llvm::ArrayRef<MirroredBucket> momentum,
                      llvm::ArrayRef<MirroredBucket> sharded = {});

} // namespace dtc
