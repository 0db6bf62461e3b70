//===- FuseMaxPoolGrad.cpp - max_pool2d_grad into batch_norm_grad ---------===//
//
// conv -> batch_norm(relu) -> max_pool2d, the CNN's block, has in its
// gradient max_pool2d_grad(r, dp) -> dy -> batch_norm_grad(x, dy, ...
// relu(r)): a full-size dy written once and read twice (the gradient's two
// passes), and r read by both. Where dy has no other use and the pooling's
// input is the ReLU's result, batch_norm_grad takes dp itself with the
// pooling's window (pool_kernel, pool_stride, pool_padding) and routes it
// plane by plane as it reads it (the CPU kernel batchNormGradMaxPool: the
// same values, bit for bit). NCHW or blocked (dtc-blocked-layout), not
// channels last; run after dtc-autodiff. The CPU's kernel only: a module
// whose dtc.target is CUDA keeps the pair (dtc-verify-backend-contract
// rejects the fused op there).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

namespace dtc {
#define GEN_PASS_DEF_FUSEMAXPOOLGRAD
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
struct FuseMaxPoolGradPass
    : public dtc::impl::FuseMaxPoolGradBase<FuseMaxPoolGradPass> {
  using Base::Base;
  void runOnOperation() override {
    auto module = getOperation()->getParentOfType<ModuleOp>();
    if (module && targetOf(module) != Target::Cpu)
      return;
    SmallVector<MaxPool2dGradOp> pools;
    getOperation().walk([&](MaxPool2dGradOp op) { pools.push_back(op); });
    for (MaxPool2dGradOp pool : pools) {
      // NCHW or blocked (channels-last tensors keep the pair).
      if (pool.getChannelsLast() || !pool.getResult().hasOneUse())
        continue;
      auto bn = dyn_cast<BatchNormGradOp>(*pool.getResult().user_begin());
      if (!bn || bn.getDy() != pool.getResult() || bn.getChannelsLast() ||
          bn.getPoolKernel() || bn.getReluResult() != pool.getX())
        continue;
      bn.getDyMutable().assign(pool.getDy());
      bn.setPoolKernel(pool.getKernel());
      bn.setPoolStride(pool.getStride());
      bn.setPoolPadding(pool.getPadding());
      pool.erase();
    }
  }
};
} // namespace
