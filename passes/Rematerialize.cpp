//===- Rematerialize.cpp - Recompute forward values in backward -----------===//
//
// Activation recomputation (torch.utils.checkpoint, Megatron's selective
// recomputation, XLA's rematerialization): a forward value that backward
// reads is, instead of being kept from forward to backward, computed again
// right before backward's first read of it, by a clone of the ops that made
// it. The clones are the same ops on the same operands in the same order,
// so the values are the same bits (dropout's mask is a function of the
// step's seed and the op's salt; batch norm's running statistics are
// folded by dtc.update_running_stats, which is never cloned). The forward
// values then die in forward, and the memory plan reuses their memory.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <limits>
#include <vector>

namespace dtc {
#define GEN_PASS_DEF_REMATERIALIZE
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {

struct RematerializePass
    : public dtc::impl::RematerializeBase<RematerializePass> {
  using Base::Base;
  void runOnOperation() override;
};

/// Ops whose results cost nothing to keep or are no activation: constants,
/// parameter reads, the batch size.
bool isFree(Operation *op) {
  return isa<ConstantOp, ParamRefOp, BatchSizeOp, ArangeOp>(op);
}

/// The work `selective` keeps: GEMMs, convolutions, attention, embedding
/// lookups (Megatron's selective recomputation keeps the GEMMs' outputs).
bool isExpensive(Operation *op) {
  return isa<MatmulOp, Conv2dOp, AttentionOp, AttentionQkvPackedOp,
             EmbeddingOp>(op);
}

/// The instance an op's dtc.block path (`h3.attn`) counts for: with
/// `checkpoints` (the module's dtc.checkpoint), the outermost checkpointed
/// instance it is inside ("" : none); without, its top-level instance
/// (`h3`).
StringRef instanceOf(StringRef path, ArrayRef<StringRef> checkpoints,
                     bool all) {
  if (all)
    return path.split('.').first;
  StringRef found;
  for (StringRef c : checkpoints)
    if ((path == c || path.starts_with((c + ".").str())) &&
        (found.empty() || c.size() < found.size()))
      found = c;
  return found;
}

/// The block instance an op belongs to (instanceOf its dtc.block), else
/// (an op a pass made inside an instance, before the instance's last
/// marked op) the instance of all its operands' makers that have one.
DenseMap<Operation *, StringRef> blockInstances(ArrayRef<Operation *> forward,
                                                DtcDialect *dialect,
                                                ArrayRef<StringRef> checkpoints,
                                                bool all) {
  DenseMap<Operation *, StringRef> instance;
  llvm::StringMap<size_t> last; // each instance's last marked op
  for (auto [i, op] : llvm::enumerate(forward))
    if (StringAttr path = dialect->getBlockAttrHelper().getAttr(op))
      if (StringRef key = instanceOf(path.getValue(), checkpoints, all);
          !key.empty())
        last[key] = i;
  for (auto [i, op] : llvm::enumerate(forward)) {
    if (StringAttr path = dialect->getBlockAttrHelper().getAttr(op)) {
      if (StringRef key = instanceOf(path.getValue(), checkpoints, all);
          !key.empty())
        instance[op] = key;
      continue;
    }
    StringRef common;
    bool agree = true;
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || isFree(def))
        continue;
      auto it = instance.find(def);
      if (it == instance.end() || (!common.empty() && common != it->second)) {
        agree = false;
        break;
      }
      common = it->second;
    }
    if (agree && !common.empty() && i < last.lookup(common))
      instance[op] = common;
  }
  return instance;
}

/// A value's bytes for one sample (dynamic dimensions, the batch, as 1).
int64_t sampleBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return 0;
  int64_t n = std::max<int64_t>(1, tensor.getElementTypeBitWidth() / 8);
  for (int64_t d : tensor.getShape())
    n *= ShapedType::isDynamic(d) ? 1 : d;
  return n;
}

/// A directed graph's minimum s-t cut (Dinic's maximum flow): after
/// maxFlow, reachable() says which side of the cut each node lies on.
class MinCut {
public:
  static constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 4;
  explicit MinCut(int nodes) : adjacent(nodes), level(nodes), next(nodes) {}
  void addEdge(int from, int to, int64_t capacity) {
    adjacent[from].push_back(int(edges.size()));
    edges.push_back({to, capacity});
    adjacent[to].push_back(int(edges.size()));
    edges.push_back({from, 0});
  }
  void maxFlow(int source, int sink) {
    for (levels(source); level[sink] >= 0; levels(source)) {
      std::fill(next.begin(), next.end(), 0);
      while (push(source, sink, kInfinite) > 0) {
      }
    }
  }
  /// Whether `node` is on the source's side (reachable in the residual
  /// graph of the last maxFlow).
  bool reachable(int node) const { return level[node] >= 0; }

private:
  struct Edge {
    int to;
    int64_t capacity;
  };
  /// Each node's distance from the source over edges with capacity left
  /// (-1: unreachable).
  void levels(int source) {
    std::fill(level.begin(), level.end(), -1);
    SmallVector<int> queue{source};
    level[source] = 0;
    for (size_t i = 0; i < queue.size(); ++i)
      for (int e : adjacent[queue[i]])
        if (edges[e].capacity > 0 && level[edges[e].to] < 0) {
          level[edges[e].to] = level[queue[i]] + 1;
          queue.push_back(edges[e].to);
        }
  }
  int64_t push(int node, int sink, int64_t flow) {
    if (node == sink)
      return flow;
    for (int &i = next[node]; i < int(adjacent[node].size()); ++i) {
      Edge &e = edges[adjacent[node][i]];
      if (e.capacity <= 0 || level[e.to] != level[node] + 1)
        continue;
      if (int64_t pushed = push(e.to, sink, std::min(flow, e.capacity))) {
        e.capacity -= pushed;
        edges[adjacent[node][i] ^ 1].capacity += pushed;
        return pushed;
      }
    }
    return 0;
  }
  std::vector<SmallVector<int>> adjacent;
  std::vector<Edge> edges;
  std::vector<int> level, next;
};

/// `selective`'s choice (AOTAutograd's min-cut partitioner): of the
/// forward ops not yet recomputed, those to recompute so that the bytes
/// kept for backward are fewest. Each op is an edge of its results' bytes
/// (keeping them), from a node its operands' ops feed to a node that
/// feeds its users; the source feeds the ops that are never recomputed
/// (GEMMs, convolutions, attention, embeddings, ops with effects or
/// regions, the step's results) and the ops backward reads feed the sink
/// (backward's reads, and those of the ops already recomputed). The
/// minimum cut keeps the ops it cuts; the ops past it (not reachable from
/// the source) are recomputed from those. Of cuts of the same bytes, it
/// keeps the values backward reads (no op recomputed for nothing).
void minCutRecompute(ArrayRef<Operation *> forward,
                     const DenseMap<Operation *, int64_t> &position,
                     Operation *ret, llvm::DenseSet<Operation *> &recompute) {
  auto inForward = [&](Operation *op) {
    return op && position.count(op) && !isFree(op) && !recompute.contains(op);
  };
  // Nodes: 0 source, 1 sink, 2 + 2i op i's input side, 3 + 2i its output.
  MinCut graph(2 + 2 * int(forward.size()));
  constexpr int source = 0, sink = 1;
  auto in = [&](Operation *op) { return 2 + 2 * int(position.lookup(op)); };
  llvm::DenseSet<Operation *> read; // by backward or a recomputed op
  for (Operation *op : forward)
    for (Operation *user : op->getUsers())
      if (Operation *at = op->getBlock()->findAncestorOpInBlock(*user);
          !at || !position.count(at) || recompute.contains(at))
        read.insert(op);
  for (Operation *op : forward) {
    if (!inForward(op))
      continue;
    int64_t bytes = 0;
    for (Value r : op->getResults())
      bytes += sampleBytes(r.getType());
    // Twice the bytes, and one more where backward does not read the op.
    graph.addEdge(in(op), in(op) + 1, 2 * bytes + (read.contains(op) ? 0 : 1));
    bool fixed = isExpensive(op) || op->getNumRegions() > 0 || !isPure(op) ||
                 llvm::is_contained(op->getUsers(), ret);
    if (fixed)
      graph.addEdge(source, in(op), MinCut::kInfinite);
    if (read.contains(op))
      graph.addEdge(in(op) + 1, sink, MinCut::kInfinite);
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); inForward(def))
        graph.addEdge(in(def) + 1, in(op), MinCut::kInfinite);
  }
  graph.maxFlow(source, sink);
  // (Those past the cut that backward does not read are cloned only as
  // what the ones it reads are made from.)
  for (Operation *op : forward)
    if (inForward(op) && !graph.reachable(in(op)))
      recompute.insert(op);
}

/// Rematerializes in one step function: every top-level block instance
/// (`blocks`), the checkpointed ones (`checkpoints`), the cheap ops
/// (`selective`).
void rematerialize(func::FuncOp f, StringRef policy,
                   ArrayRef<StringRef> checkpoints, DtcDialect *dialect) {
  Block &block = f.front();
  Operation *seed = nullptr;
  for (Operation &op : block)
    if (isa<GradSeedOp>(op)) {
      seed = &op;
      break;
    }
  if (!seed)
    return; // no backward (@eval_step)
  SmallVector<Operation *> forward;
  DenseMap<Operation *, int64_t> position;
  for (Operation &op : block) {
    if (&op == seed)
      break;
    position[&op] = int64_t(forward.size());
    forward.push_back(&op);
  }
  Operation *ret = block.getTerminator();
  auto returned = [&](Operation *op) {
    return llvm::any_of(op->getUsers(), [&](Operation *u) { return u == ret; });
  };
  DenseMap<Operation *, StringRef> instance =
      policy == "blocks" || !checkpoints.empty()
          ? blockInstances(forward, dialect, checkpoints, policy == "blocks")
          : DenseMap<Operation *, StringRef>();
  llvm::DenseSet<Operation *> recompute;
  for (Operation *op : forward) {
    if (isFree(op) || op->getNumRegions() > 0 || !isPure(op) || returned(op))
      continue;
    // An instance's values but those read outside it in forward (its
    // result, the next instance's input, which backward starts from).
    if (auto it = instance.find(op); it != instance.end()) {
      bool boundary = llvm::any_of(op->getUsers(), [&](Operation *user) {
        Operation *at = block.findAncestorOpInBlock(*user);
        return at && position.count(at) && instance.lookup(at) != it->second;
      });
      if (!boundary) {
        recompute.insert(op);
        continue;
      }
    }
  }
  if (policy == "selective")
    minCutRecompute(forward, position, ret, recompute);
  // Backward's reads of recomputed values read clones made right before
  // the first of them, the ops each needs cloned with it in forward order.
  IRMapping cloned;
  auto materialize = [&](Operation *def, Operation *before) {
    SmallVector<Operation *> needed, stack{def};
    llvm::DenseSet<Operation *> seen{def};
    while (!stack.empty()) {
      Operation *op = stack.pop_back_val();
      needed.push_back(op);
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp(); d && recompute.contains(d) &&
                                              !cloned.contains(v) &&
                                              seen.insert(d).second)
          stack.push_back(d);
    }
    llvm::sort(needed, [&](Operation *a, Operation *b) {
      return position.lookup(a) < position.lookup(b);
    });
    OpBuilder b(before);
    for (Operation *op : needed)
      b.clone(*op, cloned);
  };
  for (Operation &user : llvm::make_early_inc_range(
           llvm::make_range(std::next(seed->getIterator()), block.end()))) {
    if (&user == ret)
      continue;
    SmallVector<OpOperand *> uses;
    user.walk([&](Operation *nested) {
      for (OpOperand &use : nested->getOpOperands())
        if (Operation *d = use.get().getDefiningOp();
            d && recompute.contains(d))
          uses.push_back(&use);
    });
    for (OpOperand *use : uses) {
      if (!cloned.contains(use->get()))
        materialize(use->get().getDefiningOp(), &user);
      use->set(cloned.lookup(use->get()));
    }
  }
  // Forward ops that only backward read are gone from forward.
  for (Operation *op : llvm::reverse(forward))
    if (recompute.contains(op) && op->use_empty())
      op->erase();
}

void RematerializePass::runOnOperation() {
  if (policy != "none" && policy != "blocks" && policy != "selective") {
    getOperation().emitError("dtc-rematerialize: unknown policy '")
        << policy << "' (expected none, blocks, selective)";
    return signalPassFailure();
  }
  auto *dialect = getContext().getLoadedDialect<DtcDialect>();
  // The instances the model checkpoints (checkpoint(...) in the DSL).
  SmallVector<StringRef> checkpoints;
  if (ArrayAttr names =
          dialect->getCheckpointAttrHelper().getAttr(getOperation()))
    for (Attribute a : names)
      checkpoints.push_back(cast<StringAttr>(a).getValue());
  if (policy == "none" && checkpoints.empty())
    return;
  for (auto f : getOperation().getOps<func::FuncOp>())
    if (!f.isExternal())
      rematerialize(f, policy, checkpoints, dialect);
}

} // namespace
