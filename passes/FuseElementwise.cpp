//===- FuseElementwise.cpp - Elementwise chains into dtc.fused kernels ---===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace dtc {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
struct FuseElementwisePass
    : public dtc::impl::FuseElementwiseBase<FuseElementwisePass> {
  using Base::Base;
  void runOnOperation() override;
};

using Group = llvm::SetVector<Operation *>;

/// Ops with no operands that a fused body recomputes instead of reading.
bool isLeaf(Operation *op) {
  return op && isa<ConstantOp, BatchSizeOp>(op) && op->getNumResults() == 1 &&
         cast<RankedTensorType>(op->getResult(0).getType()).getRank() == 0;
}

/// Replaces the ops of `group` (in block order) with one dtc.fused op.
void fuse(const Group &group) {
  Operation *last = group.back();
  // Inputs: values used by members that no member defines (leaves excepted).
  llvm::SetVector<Value> inputs;
  for (Operation *op : group)
    for (Value v : op->getOperands())
      if (!group.contains(v.getDefiningOp()) && !isLeaf(v.getDefiningOp()))
        inputs.insert(v);
  // Outputs: member results used outside the group.
  SmallVector<Value> outputs;
  for (Operation *op : group)
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(),
                       [&](Operation *u) { return !group.contains(u); }))
        outputs.push_back(r);

  OpBuilder b(last);
  b.setInsertionPointAfter(last);
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  auto fused =
      FusedOp::create(b, last->getLoc(), resultTypes, inputs.getArrayRef());
  Block *body = new Block();
  fused.getBody().push_back(body);
  IRMapping map;
  for (Value in : inputs)
    map.map(in, body->addArgument(in.getType(), in.getLoc()));
  OpBuilder bb = OpBuilder::atBlockEnd(body);
  for (Operation *op : group) {
    for (Value v : op->getOperands())
      if (!map.contains(v) && isLeaf(v.getDefiningOp()))
        map.map(v, bb.clone(*v.getDefiningOp())->getResult(0));
    bb.clone(*op, map);
  }
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(map.lookup(v));
  YieldOp::create(bb, last->getLoc(), yielded);

  for (auto [v, r] : llvm::zip(outputs, fused.getResults()))
    v.replaceAllUsesWith(r);
  for (Operation *op : llvm::reverse(group.getArrayRef()))
    op->erase();
}
} // namespace

void FuseElementwisePass::runOnOperation() {
  func::FuncOp func = getOperation();
  SmallVector<Group> groups;
  // A group is closed once an op outside it has read one of its values: the
  // fused op replaces the group at the position of its last member, so no
  // later op may join it. One pass over the ops and their operands: linear
  // in the size of the function.
  SmallVector<bool> closed;
  DenseMap<Operation *, unsigned> groupOf;
  DenseMap<Value, unsigned> readBy; // the last group an operand fed
  for (Operation &op : func.getBody().front()) {
    std::optional<unsigned> joined;
    if (isElementwise(&op) && op.getNumResults() == 1) {
      // Join the open group of a producer of the same shape; a new group
      // otherwise.
      if (chains)
        for (Value v : op.getOperands()) {
          auto it = groupOf.find(v.getDefiningOp());
          if (it == groupOf.end() || closed[it->second] ||
              groups[it->second].back()->getResult(0).getType() !=
                  op.getResult(0).getType())
            continue;
          joined = it->second;
          break;
        }
      // Else the open group of a sibling reading the same value, of the
      // same shape (one kernel reads it once: a GELU recomputed in
      // backward beside its derivative).
      if (chains && !joined)
        for (Value v : op.getOperands()) {
          auto it = readBy.find(v);
          if (v.getType() != op.getResult(0).getType() || it == readBy.end() ||
              closed[it->second] ||
              groups[it->second].back()->getResult(0).getType() !=
                  op.getResult(0).getType())
            continue;
          joined = it->second;
          break;
        }
      if (!joined) {
        joined = groups.size();
        groups.emplace_back();
        closed.push_back(false);
      }
      groups[*joined].insert(&op);
      groupOf[&op] = *joined;
      for (Value v : op.getOperands())
        readBy[v] = *joined;
      if (maxOps > 0 && (int64_t)groups[*joined].size() >= maxOps)
        closed[*joined] = true;
    }
    // Every other group this op reads from is closed.
    for (Value v : op.getOperands()) {
      auto it = groupOf.find(v.getDefiningOp());
      if (it != groupOf.end() && (!joined || it->second != *joined))
        closed[it->second] = true;
    }
  }
  for (Group &g : groups) {
    // A group nobody reads is dead code: drop it.
    bool used = llvm::any_of(g, [&](Operation *op) {
      return llvm::any_of(op->getUsers(),
                          [&](Operation *u) { return !g.contains(u); });
    });
    if (!used) {
      for (Operation *op : llvm::reverse(g.getArrayRef()))
        op->erase();
      continue;
    }
    fuse(g);
  }
  // Leaves that only fed fused bodies are now dead.
  func.walk([](Operation *op) {
    if (isLeaf(op) && op->use_empty() && !isa<FusedOp>(op->getParentOp()))
      op->erase();
  });
}
