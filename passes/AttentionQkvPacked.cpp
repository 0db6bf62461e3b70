//===- AttentionQkvPacked.cpp - Attention on the packed projection --------===//
//
// torch's attention block projects x once into [B, T, 3C] and splits it:
// `q, k, v = split(c_attn, 3)`, each reshaped to [B, T, H, D]; backward
// concatenates dq, dk and dv into the projection's gradient. Tokens-first
// (after dtc-attention-tokens-first), the three slices are rows of one
// tensor already: a dtc.attention whose q, k and v are the reshaped
// results 0, 1 and 2 of one dtc.split of the last dimension becomes a
// dtc.attention_qkvpacked of that tensor reshaped to [B, T, 3, H, D] (the
// kernels read the slices in place, rows 3 H D apart: no copy), and its
// dtc.attention_grad, where dq, dk and dv go (reshaped back to [B, T, C])
// to exactly such a concatenation, a dtc.attention_qkvpacked_grad whose
// dqkv, reshaped to [B, T, 3C], replaces the concatenation: the copies of
// the split and the concatenation are gone. The same floats (the kernels
// only find each row elsewhere). Where a gradient does not qualify its
// forward is still rewritten (its gradient then reads the split's results,
// which stay). After dtc-attention-tokens-first and the canonicalizer.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

namespace dtc {
#define GEN_PASS_DEF_ATTENTIONQKVPACKED
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {

/// q, k, v of a tokens-first attention as slices of one tensor: `x` [...,
/// T, 3 H D], split in three along its last dimension, and the type of
/// its packed form [..., T, 3, H, D].
struct Packed {
  Value x;
  RankedTensorType packedType;
};

/// The split result that `v` reshapes ([..., T, C] to [..., T, H, D], the
/// leading dimensions kept), or null.
OpResult reshapedSlice(Value v) {
  auto r = v.getDefiningOp<ReshapeOp>();
  if (!r)
    return {};
  auto from = cast<RankedTensorType>(r.getX().getType());
  auto to = cast<RankedTensorType>(v.getType());
  if (to.getRank() != from.getRank() + 1 ||
      from.getShape().drop_back() != to.getShape().drop_back(2))
    return {};
  auto slice = dyn_cast<OpResult>(r.getX());
  if (!slice || !isa<SplitOp>(slice.getOwner()))
    return {};
  return slice;
}

/// q, k and v (tokens-first [..., T, H, D], one type) the reshaped results
/// 0, 1, 2 of a three-way split of the last dimension.
std::optional<Packed> packedOperands(Value q, Value k, Value v) {
  if (q.getType() != k.getType() || q.getType() != v.getType())
    return std::nullopt;
  OpResult sq = reshapedSlice(q), sk = reshapedSlice(k), sv = reshapedSlice(v);
  if (!sq || !sk || !sv)
    return std::nullopt;
  auto split = cast<SplitOp>(sq.getOwner());
  auto x = cast<RankedTensorType>(split.getX().getType());
  if (sk.getOwner() != split || sv.getOwner() != split ||
      split.getNumResults() != 3 || sq.getResultNumber() != 0 ||
      sk.getResultNumber() != 1 || sv.getResultNumber() != 2 ||
      split.getAxis() != x.getRank() - 1)
    return std::nullopt;
  auto t = cast<RankedTensorType>(q.getType());
  SmallVector<int64_t> shape(t.getShape());
  shape.insert(shape.end() - 2, 3);
  return Packed{split.getX(), RankedTensorType::get(shape, t.getElementType())};
}

/// The concatenation that dq, dk and dv (each reshaped to [..., T, C])
/// alone make, in that order along the last dimension, or null.
ConcatOp packedConcat(AttentionGradOp g) {
  ConcatOp concat;
  for (auto [i, grad] : llvm::enumerate(g.getResults())) {
    if (!grad.hasOneUse())
      return {};
    auto r = dyn_cast<ReshapeOp>(*grad.getUsers().begin());
    if (!r || !r.getResult().hasOneUse())
      return {};
    auto from = cast<RankedTensorType>(grad.getType());
    auto to = cast<RankedTensorType>(r.getType());
    if (to.getRank() + 1 != from.getRank() ||
        to.getShape().drop_back() != from.getShape().drop_back(2))
      return {};
    auto c = dyn_cast<ConcatOp>(*r.getResult().getUsers().begin());
    if (!c || (concat && c != concat) || c.getInputs().size() != 3 ||
        c.getInputs()[i] != r.getResult() || c.getAxis() != to.getRank() - 1)
      return {};
    concat = c;
  }
  return concat;
}

struct AttentionQkvPackedPass
    : public dtc::impl::AttentionQkvPackedBase<AttentionQkvPackedPass> {
  using Base::Base;
  void runOnOperation() override {
    // One packed view per split, shared by its forward and gradient.
    llvm::DenseMap<Value, Value> views;
    auto view = [&](OpBuilder &b, Location loc, const Packed &p) {
      Value &v = views[p.x];
      if (!v) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointAfterValue(p.x);
        v = ReshapeOp::create(b, loc, p.packedType, p.x);
      }
      return v;
    };
    SmallVector<Operation *> rewritten;
    getOperation().walk([&](Operation *op) {
      if (auto a = dyn_cast<AttentionOp>(op)) {
        auto p = a.getTokensFirst()
                     ? packedOperands(a.getQ(), a.getK(), a.getV())
                     : std::nullopt;
        if (!p)
          return;
        OpBuilder b(a);
        auto packed = AttentionQkvPackedOp::create(
            b, a.getLoc(), a.getResult().getType(), a.getLse().getType(),
            view(b, a.getLoc(), *p), a.getCausal(), a.getScale());
        a.getResult().replaceAllUsesWith(packed.getResult());
        a.getLse().replaceAllUsesWith(packed.getLse());
        rewritten.push_back(a);
      } else if (auto g = dyn_cast<AttentionGradOp>(op)) {
        auto p = g.getTokensFirst()
                     ? packedOperands(g.getQ(), g.getK(), g.getV())
                     : std::nullopt;
        ConcatOp concat = p ? packedConcat(g) : ConcatOp();
        if (!concat)
          return;
        OpBuilder b(g);
        Value qkv = view(b, g.getLoc(), *p);
        auto packed = AttentionQkvPackedGradOp::create(
            b, g.getLoc(), qkv.getType(), qkv, g.getOut(), g.getLse(),
            g.getDy(), g.getCausal(), g.getScale());
        b.setInsertionPoint(concat);
        concat.getResult().replaceAllUsesWith(ReshapeOp::create(
            b, concat.getLoc(), concat.getType(), packed.getDqkv()));
        rewritten.push_back(concat);
        for (Value input : concat.getInputs())
          rewritten.push_back(input.getDefiningOp());
        rewritten.push_back(g);
      }
    });
    for (Operation *op : rewritten)
      op->erase();
    // The splits (and their reshapes) that only the rewritten ops read.
    for (auto &[x, packed] : views)
      for (Operation *user : llvm::make_early_inc_range(x.getUsers()))
        if (auto split = dyn_cast<SplitOp>(user)) {
          SmallVector<Operation *> reshapes;
          bool dead = true;
          for (Value r : split.getResults())
            for (Operation *u : r.getUsers())
              if (isa<ReshapeOp>(u) && u->use_empty())
                reshapes.push_back(u);
              else
                dead = false;
          if (!dead)
            continue;
          for (Operation *r : reshapes)
            r->erase();
          split.erase();
        }
  }
};
} // namespace
