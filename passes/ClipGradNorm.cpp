//===- ClipGradNorm.cpp - Gradients clipped by their global norm ----------===//
//
// torch.nn.utils.clip_grad_norm_ compiled into the step: what a PyTorch
// user calls between loss.backward() (DDP's all-reduce included) and
// optimizer.step(). The factor becomes each update's `scale`.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/Steps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>

namespace dtc {
#define GEN_PASS_DEF_CLIPGRADNORM
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {

struct ClipGradNormPass : public dtc::impl::ClipGradNormBase<ClipGradNormPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    DtcDialect *dtc = getContext().getLoadedDialect<DtcDialect>();
    if (!dtc || !dtc->getClipGradNormAttrHelper().getAttr(module))
      return;
    func::FuncOp step = steps::trainStep(module, *this);
    if (!step)
      return signalPassFailure();
    // Sharded (dtc-shard-weight-update): the norm from the shards.
    SmallVector<ShardUpdateOp> shardUpdates(step.getOps<ShardUpdateOp>());
    if (!shardUpdates.empty())
      return clipShards(shardUpdates);
    SmallVector<ApplyGradientOp> updates(step.getOps<ApplyGradientOp>());
    if (updates.empty())
      return;
    if (!step.getOps<UpdateGroupOp>().empty()) {
      step.emitError("dtc-clip-grad-norm runs before dtc-group-updates");
      return signalPassFailure();
    }
    // The updates go last, in the parameters' order (torch's
    // model.parameters()): every gradient exists there, and the norm's sum
    // runs in one order whatever the buckets and the overlap schedule made
    // of the updates' (a float sum depends on its order; dtc --no-overlap
    // must train the same parameters).
    llvm::DenseMap<StringAttr, unsigned> order;
    for (ParamOp p : module.getOps<ParamOp>())
      order.try_emplace(p.getSymNameAttr(), unsigned(order.size()));
    std::stable_sort(updates.begin(), updates.end(),
                     [&](ApplyGradientOp a, ApplyGradientOp b) {
                       return order.lookup(a.getParamAttr().getAttr()) <
                              order.lookup(b.getParamAttr().getAttr());
                     });
    Operation *ret = step.front().getTerminator();
    for (ApplyGradientOp u : updates)
      u->moveBefore(ret);
    OpBuilder b(updates.front());
    Location loc = updates.front().getLoc();
    SmallVector<Value> grads;
    for (ApplyGradientOp u : updates)
      grads.push_back(u.getGrad());
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    Value sumSq = SumSquaresOp::create(b, loc, scalar, grads);
    Value coef = ClipCoefOp::create(b, loc, scalar, sumSq);
    // Each update multiplies its gradient by the factor as it reads it (no
    // pass writing the clipped gradients out: torch's clip_grad_norm_
    // scales them in place, the same products).
    for (ApplyGradientOp u : updates)
      u.getScaleMutable().assign(coef);
  }

  /// Each rank sums the squares of its shards (whose padding is zero),
  /// one all-reduce of that float, numbered after the buckets, adds the
  /// ranks' sums: the same norm on every rank, summed in another order than
  /// the replicated step's (within float rounding of it).
  void clipShards(MutableArrayRef<ShardUpdateOp> updates) {
    OpBuilder b(updates.front());
    Location loc = updates.front().getLoc();
    SmallVector<Value> shards;
    int64_t id = 0;
    for (ShardUpdateOp u : updates) {
      shards.push_back(u.getShard());
      id = std::max<int64_t>(id, int64_t(u.getBucket()) + 1);
    }
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    Value part = SumSquaresOp::create(b, loc, scalar, shards);
    Value sumSq = AllReduceBucketOp::create(b, loc, TypeRange{scalar},
                                            ValueRange{part}, id)
                      .getResult(0);
    Value coef = ClipCoefOp::create(b, loc, scalar, sumSq);
    for (ShardUpdateOp u : updates)
      u.getGradScaleMutable().assign(coef);
  }
};

} // namespace
