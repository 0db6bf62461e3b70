//===- Pipeline.cpp - The registration hub and the compile pipeline -------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void dtc::buildPipeline(OpPassManager &pm, const PipelineOptions &options) {
  if (options.channelsLast && options.autodiff)
    pm.addNestedPass<func::FuncOp>(createChannelsLast());
  else if (options.blocked && options.autodiff)
    pm.addNestedPass<func::FuncOp>(createBlockedLayout());
  if (options.autodiff) {
    // Before autodiff, in every layout: a layout's inner transposes and
    // conversions cancel, and transposes fold into the matmuls that read
    // them, so that backward differentiates the folded forward (no
    // transposes of its own) and the program does not depend on the layout
    // auto picks for this host.
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createAutodiff());
  }
  // (Before the canonicalizer, which cancels the transposes it leaves.)
  pm.addNestedPass<func::FuncOp>(createAttentionTokensFirst());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // (After the canonicalizer: the heads' transposes are gone, the split's
  // slices read tokens-first.)
  pm.addNestedPass<func::FuncOp>(createAttentionQkvPacked());
  pm.addPass(createDeriveSteps());
  pm.addPass(createAccumulateGradients());
  {
    RematerializeOptions remat;
    remat.policy = options.remat;
    pm.addPass(createRematerialize(remat));
  }
  if (options.allreduce) {
    pm.addPass(createInsertGradAllReduce());
    BucketAllReduceOptions buckets;
    buckets.bucketBytes = options.bucketBytes;
    buckets.firstBucketBytes = options.firstBucketBytes;
    buckets.byBlock = options.shardByBlock;
    pm.addPass(createBucketAllReduce(buckets));
    if (options.overlap)
      pm.addPass(createOverlapAllReduce());
    // (Acts where the module has dtc.shard.)
    ShardWeightUpdateOptions shard;
    shard.prefetch = options.shardPrefetch;
    shard.carry = options.overlap;
    pm.addPass(createShardWeightUpdate(shard));
  }
  pm.addPass(createClipGradNorm());
  // (Acts where the module's target has the fused kernel: the CPU's.)
  if (options.fuse)
    pm.addNestedPass<func::FuncOp>(createFuseMaxPoolGrad());
  // (A GELU's derivative beside the GELU pays only inside its kernel.)
  if (options.fuse)
    pm.addNestedPass<func::FuncOp>(createDerivativesInForward());
  // Elementwise ops reach the emitters only inside dtc.fused: without
  // fusion (dtc --no-fuse), one kernel per op.
  FuseElementwiseOptions fuse;
  fuse.chains = options.fuse;
  pm.addNestedPass<func::FuncOp>(createFuseElementwise(fuse));
  pm.addPass(createPlanMemory());
  if (options.foldMomentum)
    pm.addPass(createFoldMomentum());
  pm.addPass(createGroupUpdates());
  {
    PredictOptions predict;
    predict.machine = options.machine;
    predict.budget = options.budget;
    pm.addPass(createPredict(predict));
  }
  pm.addPass(createVerifyBackendContract());
}

void dtc::registerDialects(DialectRegistry &registry) {
  registry.insert<DtcDialect, dtcrt::DtcrtDialect, func::FuncDialect>();
}

/// The pipeline's description (dtc-opt --help): its passes with the
/// default options, printed from buildPipeline itself.
static const std::string &pipelineDescription() {
  static const std::string text = [] {
    OpPassManager pm("builtin.module");
    dtc::buildPipeline(pm, dtc::PipelineOptions());
    std::string passes;
    llvm::raw_string_ostream os(passes);
    pm.printAsTextualPipeline(os);
    // The passes' names, without their options.
    std::string names;
    int depth = 0;
    for (char ch : passes) {
      depth += ch == '{';
      if (!depth)
        names += ch;
      depth -= ch == '}';
    }
    return "The whole dtc pipeline ([dtc-channels-last or "
           "dtc-blocked-layout first with those options]): " +
           names;
  }();
  return text;
}

void dtc::registerAllPasses() {
  registerDtcPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  PassPipelineRegistration<PipelineOptions>(
      "dtc-pipeline", pipelineDescription(), buildPipeline);
}
