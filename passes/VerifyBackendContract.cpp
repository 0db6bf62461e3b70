//===- VerifyBackendContract.cpp - Fully planned IR, or a diagnostic ------===//
//
// What the emitters may assume, checked once (Passes.td says what the
// contract is). The emitters call verifyBackendContract before printing.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Steps.h"

#include "dialects/dtc/ShapeInference.h"

namespace dtc {
#define GEN_PASS_DEF_VERIFYBACKENDCONTRACT
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
int64_t bytesOf(Type t) {
  auto rt = cast<RankedTensorType>(t);
  return shape::numElementsPerBatch(rt) *
         (rt.getElementType().getIntOrFloatBitWidth() / 8);
}

/// Whether `v` needs a buffer of its own in the arena.
bool needsBuffer(Value v) {
  if (!isa<RankedTensorType>(v.getType()) || isa<BlockArgument>(v) ||
      v.getDefiningOp<ParamRefOp>())
    return false;
  auto r = cast<OpResult>(v);
  auto tied = dyn_cast<TiedOpInterface>(r.getOwner());
  return !(tied && tied.getTiedOperand(r.getResultNumber()));
}

struct Checker {
  ModuleOp module;
  DtcDialect *dialect;
  bool ok = true;

  InFlightDiagnostic violation(Operation *op) {
    ok = false;
    return op->emitError("backend contract: ");
  }

  void checkModule() {
    if (!dialect->getRecipeAttrHelper().getAttr(module))
      violation(module) << "the module has no dtc.recipe";
    OptimizerAttr opt = dialect->getOptimizerAttrHelper().getAttr(module);
    if (!opt)
      violation(module) << "the module has no dtc.optimizer";
    PersistentAttr persistent =
        dialect->getPersistentAttrHelper().getAttr(module);
    if (!persistent) {
      violation(module)
          << "the module has no dtc.persistent (run dtc-plan-memory)";
      return;
    }
    int states = opt ? opt.numStateBuffers() : 0;
    for (ParamOp p : module.getOps<ParamOp>()) {
      PlacementAttr at = dialect->getPlacementAttrHelper().getAttr(p);
      // (Stage 3: a parameter lives in its bucket's shards, checked with
      // them.)
      if (!at && shardOf(module) &&
          shardOf(module).getStage() == ShardStage::Parameters)
        continue;
      if (!at) {
        violation(p) << "parameter '" << p.getSymName()
                     << "' has no dtc.placement";
        continue;
      }
      int64_t bytes = bytesOf(p.getType());
      if (at.getOffset() + bytes > persistent.getParamBytes())
        violation(p) << "parameter '" << p.getSymName()
                     << "' lies outside the parameters of the persistent block";
      // (Sharded: the state is in the buckets' shards, checked with them.)
      if (!at.getStateOffset() && shardOf(module))
        continue;
      if (!at.getStateOffset()) {
        violation(p) << "parameter '" << p.getSymName()
                     << "' has no optimizer state offset";
        continue;
      }
      const int64_t model =
          persistent.getParamBytes() + persistent.getBufferBytes();
      if (*at.getStateOffset() < model && states)
        violation(p) << "the optimizer state of '" << p.getSymName()
                     << "' overlaps the parameters or buffers";
      if (*at.getStateOffset() + states * bytes > persistent.getBytes())
        violation(p) << "the optimizer state of '" << p.getSymName()
                     << "' lies outside the persistent block";
    }
    for (BufferOp buf : module.getOps<BufferOp>()) {
      PlacementAttr at = dialect->getPlacementAttrHelper().getAttr(buf);
      if (!at) {
        violation(buf) << "buffer '" << buf.getSymName()
                       << "' has no dtc.placement";
        continue;
      }
      if (at.getOffset() < persistent.getParamBytes() ||
          at.getOffset() + bytesOf(buf.getType()) >
              persistent.getParamBytes() + persistent.getBufferBytes())
        violation(buf) << "buffer '" << buf.getSymName()
                       << "' lies outside the buffers of the persistent block";
    }
  }

  /// The target's rules (the module's dtc.target): what its kernels can
  /// run. One diagnostic per rule, at the first op that breaks it.
  void checkTarget() {
    if (targetOf(module) != Target::Cuda)
      return;
    Operation *fused = nullptr, *notNchw = nullptr;
    module.walk([&](Operation *op) {
      if (auto bn = dyn_cast<BatchNormGradOp>(op); bn && bn.getPoolKernel())
        fused = fused ? fused : op;
      auto blocked = [](Type t) {
        return isa<RankedTensorType>(t) && shape::isBlocked(t);
      };
      if (op->hasAttr("channels_last") ||
          llvm::any_of(op->getOperandTypes(), blocked) ||
          llvm::any_of(op->getResultTypes(), blocked))
        notNchw = notNchw ? notNchw : op;
    });
    if (fused)
      violation(fused) << "the CUDA kernels have no fused max-pool and "
                          "batch-norm gradient (dtc-fuse-max-pool-grad fuses "
                          "for the CPU target only)";
    if (notNchw)
      violation(notNchw)
          << "the CUDA kernels are NCHW only: this op is planned "
          << (notNchw->hasAttr("channels_last") ? "channels-last"
                                                : "blocked (nChw16c)")
          << " (dtc --layout=channels-last and --layout=blocked are for "
             "--target=cpu)";
  }

  void checkStep(func::FuncOp f) {
    if (f.isExternal() || !f.getBody().hasOneBlock()) {
      violation(f) << "a step has one block";
      return;
    }
    if (f.getNumArguments() != 2) {
      violation(f) << "a step takes the input and the labels";
      return;
    }
    ArenaAttr arena = dialect->getArenaAttrHelper().getAttr(f);
    if (!arena) {
      violation(f) << "@" << f.getSymName()
                   << " has no dtc.arena (run dtc-plan-memory)";
      return;
    }
    for (Operation &op : f.front()) {
      if (isElementwise(&op)) {
        violation(&op) << "elementwise ops are emitted only inside dtc.fused "
                          "(run dtc-fuse-elementwise)";
        continue;
      }
      if (isa<ApplyGradientOp>(op)) {
        violation(&op)
            << "parameter updates are emitted only as dtc.update_group "
               "(run dtc-group-updates)";
        continue;
      }
      if (isa<AccumulateGradientOp, TakeAccumulatedOp>(op)) {
        PlacementAttr at = dialect->getPlacementAttrHelper().getAttr(&op);
        auto t = cast<RankedTensorType>(op.getOperand(0).getType());
        auto persistent = dialect->getPersistentAttrHelper().getAttr(
            op.getParentOfType<ModuleOp>());
        if (!at || !persistent ||
            at.getOffset() <
                persistent.getParamBytes() + persistent.getBufferBytes() ||
            at.getOffset() + bytesOf(t) > persistent.getBytes())
          violation(&op) << "an accumulator lies outside the persistent block "
                            "(dtc.placement; run dtc-plan-memory)";
      }
      checkBuffers(&op, arena);
      checkScratch(&op, arena);
      if (isa<AllReduceOp, AllReduceBucketOp, AllReduceStartOp,
              ReduceScatterStartOp>(op))
        checkBucket(&op, arena);
      if (auto rs = dyn_cast<ReduceScatterStartOp>(op))
        checkShardedBucket(rs);
    }
  }

  void checkBuffers(Operation *op, ArenaAttr arena) {
    DenseI64ArrayAttr offsets = dialect->getOffsetsAttrHelper().getAttr(op);
    for (OpResult r : op->getResults()) {
      if (!needsBuffer(r))
        continue;
      if (!offsets || offsets[r.getResultNumber()] < 0) {
        violation(op) << "result #" << r.getResultNumber()
                      << " has no buffer (dtc.offsets; run dtc-plan-memory)";
        continue;
      }
      auto t = cast<RankedTensorType>(r.getType());
      bool batched = shape::isBatched(t);
      int64_t end = offsets[r.getResultNumber()] + bytesOf(t);
      int64_t size = batched ? arena.getPerSample() : arena.getFixed();
      if (end > size)
        violation(op) << "result #" << r.getResultNumber() << " ends at byte "
                      << end << (batched ? " per sample" : "")
                      << ", past its arena region (" << size << ")";
    }
  }

  void checkScratch(Operation *op, ArenaAttr arena) {
    auto scratch = dyn_cast<ScratchOpInterface>(op);
    int64_t bytes = scratch ? scratch.getScratchBytes() : 0;
    if (bytes <= 0)
      return;
    IntegerAttr at = dialect->getScratchAttrHelper().getAttr(op);
    if (!at) {
      violation(op) << "needs " << bytes
                    << " bytes of scratch memory and has no dtc.scratch (run "
                       "dtc-plan-memory)";
      return;
    }
    if (at.getInt() + bytes > arena.getFixed())
      violation(op) << "scratch ends at byte " << at.getInt() + bytes
                    << ", past the arena's fixed region (" << arena.getFixed()
                    << ")";
  }

  /// A sharded bucket: its ranks' shards make it, its parameters and this
  /// rank's shard of their state lie in the persistent block.
  void checkShardedBucket(ReduceScatterStartOp rs) {
    BucketPlanAttr plan = dialect->getBucketPlanAttrHelper().getAttr(rs);
    ModuleOp module = rs->getParentOfType<ModuleOp>();
    ShardAttr shard = shardOf(module);
    auto persistent = dialect->getPersistentAttrHelper().getAttr(module);
    if (!plan || !shard || !persistent) {
      violation(rs) << "a reduce-scatter needs the module's dtc.shard and a "
                       "memory plan";
      return;
    }
    int64_t n = rs.getShard().getType().getNumElements();
    if (plan.getShard() != n || plan.getCount() != n * shard.getRanks() ||
        !plan.getParamOffset() || !plan.getStateOffset()) {
      violation(rs) << "the bucket is not planned as " << shard.getRanks()
                    << " shards of " << n
                    << " floats with its parameters and state "
                       "(dtc.bucket_plan; run dtc-plan-memory)";
      return;
    }
    int64_t states = optimizerStateBuffers(module);
    const int64_t params = shard.getStage() == ShardStage::Parameters
                               ? n
                               : plan.getCount(); // the shard, or the bucket
    if (*plan.getParamOffset() + params * 4 > persistent.getParamBytes() ||
        *plan.getStateOffset() + states * n * 4 > persistent.getBytes())
      violation(rs) << "the bucket's parameters or its shard of their state "
                       "lie outside the persistent block";
  }

  void checkBucket(Operation *op, ArenaAttr arena) {
    BucketPlanAttr plan = dialect->getBucketPlanAttrHelper().getAttr(op);
    if (!plan) {
      violation(op) << "a gradient collective has no dtc.bucket_plan (run "
                       "dtc-plan-memory)";
      return;
    }
    int64_t begin = plan.getOffset(), end = begin + plan.getCount() * 4;
    if (end > arena.getFixed())
      violation(op) << "the bucket ends at byte " << end
                    << ", past the fixed region (" << arena.getFixed() << ")";
    for (auto [i, g] : llvm::enumerate(op->getOperands())) {
      auto r = dyn_cast<OpResult>(g);
      DenseI64ArrayAttr offsets =
          r ? dialect->getOffsetsAttrHelper().getAttr(r.getOwner()) : nullptr;
      int64_t at = offsets ? offsets[r.getResultNumber()] : -1;
      if (at < begin || at + bytesOf(g.getType()) > end) {
        violation(op) << "gradient #" << i << " of the bucket lies outside it";
        return; // one diagnostic per bucket
      }
    }
  }
};
} // namespace

LogicalResult dtc::verifyBackendContract(ModuleOp module) {
  Checker c{module, module->getContext()->getLoadedDialect<DtcDialect>()};
  if (!c.dialect)
    return module.emitError("backend contract: the dtc dialect is not loaded");
  c.checkModule();
  c.checkTarget();
  for (StringRef name : {steps::kTrain, steps::kGrad, steps::kEval}) {
    auto f = module.lookupSymbol<func::FuncOp>(name);
    if (!f) {
      c.violation(module) << "the module has no @" << name;
      continue;
    }
    c.checkStep(f);
  }
  return success(c.ok);
}

namespace {
struct VerifyBackendContractPass
    : public dtc::impl::VerifyBackendContractBase<VerifyBackendContractPass> {
  void runOnOperation() override {
    if (failed(verifyBackendContract(getOperation())))
      signalPassFailure();
  }
};
} // namespace
