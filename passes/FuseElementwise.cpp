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

/// Whether `op` may join `group`, which then ends at `op`: every value of the
/// group used outside it must be used only after `op` (the fused op replaces
/// the group at the position of its last member).
bool canJoin(const Group &group, Operation *op) {
  if (op->getResult(0).getType() != group.back()->getResult(0).getType())
    return false;
  for (Operation *member : group)
    for (Operation *user : member->getUsers())
      if (user != op && !group.contains(user) && !op->isBeforeInBlock(user))
        return false;
  return true;
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
  auto fused = FusedOp::create(b, last->getLoc(), resultTypes,
                               inputs.getArrayRef());
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
  DenseMap<Operation *, unsigned> groupOf;
  for (Operation &op : func.getBody().front()) {
    if (!isElementwise(&op) || op.getNumResults() != 1)
      continue;
    // Join the group of a producer when legal; a new group otherwise.
    std::optional<unsigned> joined;
    for (Value v : chains ? op.getOperands() : OperandRange(op.operand_end(), op.operand_end())) {
      auto it = groupOf.find(v.getDefiningOp());
      if (it == groupOf.end() || !canJoin(groups[it->second], &op))
        continue;
      joined = it->second;
      break;
    }
    if (!joined) {
      joined = groups.size();
      groups.emplace_back();
    }
    groups[*joined].insert(&op);
    groupOf[&op] = *joined;
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
