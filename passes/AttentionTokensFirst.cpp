//===- AttentionTokensFirst.cpp - Attention on [..., T, H, D] operands ----===//
//
// torch's attention block reads its heads as reshape(x, [B, T, H, D])
// .transpose(1, 2) and writes them back with the inverse transpose: two
// copies of every q, k, v and output forward, four more gradients back. A
// dtc.attention whose q, k and v are each such a transpose (of the last
// but two and last but one dimensions) takes the transposes' inputs
// instead and gets `tokens_first`, its result transposed back for its
// users; its dtc.attention_grad likewise takes q, k, v, out and dy
// tokens-first (the sources of transposes where they are ones, else a
// transpose) and gives dq, dk, dv tokens-first, transposed back. The
// canonicalizer that follows cancels each pair of transposes (the
// transpose folder), so that the attention kernels read the heads in
// place, at a stride of H rows. Only where no transpose would be left to
// swap a result back (qualifies() below). The same floats: only where the
// kernels find each row changes. After dtc-autodiff, on any target.
//
//===----------------------------------------------------------------------===//
#include "dialects/dtc/ShapeInference.h"
#include "passes/Passes.h"

namespace dtc {
#define GEN_PASS_DEF_ATTENTIONTOKENSFIRST
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
using dtc::shape::swapTokensAndHeads;
using dtc::shape::tokensHeadsSwap;

/// The x of `v = transpose(x, tokensHeadsSwap)`, or null.
Value headSwapSource(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  auto rank = cast<RankedTensorType>(v.getType()).getRank();
  if (!t || rank < 3 || !llvm::equal(t.getPerm(), tokensHeadsSwap(rank)))
    return {};
  return t.getX();
}

/// v (head-major) as tokens-first, or the reverse: the source of a head
/// swap, else a new one.
Value swapped(OpBuilder &b, Location loc, Value v) {
  if (Value x = headSwapSource(v))
    return x;
  auto rank = cast<RankedTensorType>(v.getType()).getRank();
  return TransposeOp::create(b, loc, v, tokensHeadsSwap(rank));
}

/// q, k and v of an attention (or its gradient) each a head swap.
bool readsSwappedHeads(Value q, Value k, Value v) {
  return headSwapSource(q) && headSwapSource(k) && headSwapSource(v);
}

/// Every user of v a head swap (which then cancels with the one back).
bool onlySwapped(Value v) {
  return llvm::all_of(v.getUsers(), [](Operation *u) {
    auto t = dyn_cast<TransposeOp>(u);
    return t && headSwapSource(t.getResult());
  });
}

/// A gradient worth rewriting: no transposes left around it (its dq, dk
/// and dv each go to head swaps only, as torch's block's gradients do).
bool qualifies(AttentionGradOp g) {
  return !g.getTokensFirst() &&
         readsSwappedHeads(g.getQ(), g.getK(), g.getV()) &&
         llvm::all_of(g.getResults(), onlySwapped);
}

/// A forward worth rewriting: its result read by head swaps and by
/// gradients that are rewritten too (elsewhere it would be swapped back).
bool qualifies(AttentionOp a) {
  return !a.getTokensFirst() &&
         readsSwappedHeads(a.getQ(), a.getK(), a.getV()) &&
         llvm::all_of(a.getResult().getUsers(), [&](Operation *u) {
           if (auto t = dyn_cast<TransposeOp>(u))
             return bool(headSwapSource(t.getResult()));
           auto g = dyn_cast<AttentionGradOp>(u);
           return g && g.getOut() == a.getResult() &&
                  g.getDy() != a.getResult() && qualifies(g);
         });
}

struct AttentionTokensFirstPass
    : public dtc::impl::AttentionTokensFirstBase<AttentionTokensFirstPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<AttentionOp> forwards;
    SmallVector<AttentionGradOp> grads;
    getOperation().walk([&](Operation *op) {
      if (auto a = dyn_cast<AttentionOp>(op)) {
        if (qualifies(a))
          forwards.push_back(a);
      } else if (auto g = dyn_cast<AttentionGradOp>(op)) {
        if (qualifies(g))
          grads.push_back(g);
      }
    });
    // The forwards first: a gradient's `out` is then a head swap of the
    // tokens-first result, and takes that.
    for (AttentionOp a : forwards) {
      OpBuilder b(a);
      auto t = AttentionOp::create(
          b, a.getLoc(), swapTokensAndHeads(a.getResult().getType()),
          a.getLse().getType(), headSwapSource(a.getQ()),
          headSwapSource(a.getK()), headSwapSource(a.getV()), a.getCausal(),
          a.getScale(), /*tokens_first=*/true);
      a.getResult().replaceAllUsesWith(swapped(b, a.getLoc(), t.getResult()));
      a.getLse().replaceAllUsesWith(t.getLse());
      a.erase();
    }
    for (AttentionGradOp g : grads) {
      OpBuilder b(g);
      const Location loc = g.getLoc();
      Value q = headSwapSource(g.getQ()), k = headSwapSource(g.getK()),
            v = headSwapSource(g.getV());
      Value out = swapped(b, loc, g.getOut());
      Value dy = swapped(b, loc, g.getDy());
      auto t = AttentionGradOp::create(
          b, loc, q.getType(), k.getType(), v.getType(), q, k, v, out,
          g.getLse(), dy, g.getCausal(), g.getScale(), /*tokens_first=*/true);
      for (auto [old, now] : llvm::zip(g.getResults(), t.getResults()))
        old.replaceAllUsesWith(swapped(b, loc, now));
      g.erase();
    }
  }
};
} // namespace
