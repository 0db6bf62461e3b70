//===- PlanReport.cpp - The compile-time plan, and the dtc-report pass ----===//
#include "passes/PlanReport.h"
#include "passes/Passes.h"
#include "passes/Steps.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include <map>

namespace dtc {
#define GEN_PASS_DEF_REPORT
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

namespace {
/// The most bytes of gradient buckets and reduce-scatter shards live at
/// once in `train`: a bucket from its first gradient to its reduce-scatter's
/// wait (stage 2, whose shard then holds the sum) or to the step's end; a
/// shard of its own from its start to the end. Also adds up the floats the
/// step's collectives carry.
int64_t gradientPeak(func::FuncOp train, int64_t &floats,
                     int64_t &gatheredPeak) {
  DtcDialect *dtc = train->getContext()->getLoadedDialect<DtcDialect>();
  DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : train.front())
    index[&op] = n++;
  std::map<int64_t, int64_t> delta;   // op index -> bytes allocated (freed < 0)
  std::map<int64_t, int64_t> gathers; // the same for stage 3's gathers
  DenseMap<int64_t, BucketPlanAttr> sharded;
  train.walk([&](ReduceScatterStartOp rs) {
    sharded[int64_t(rs.getBucket())] =
        dtc->getBucketPlanAttrHelper().getAttr(rs);
  });
  for (Operation &op : train.front()) {
    if (auto gather = dyn_cast<GatherParamsStartOp>(op)) {
      // Stage 3: a bucket gathered whole, from its start to its views' last
      // reads.
      int64_t bytes = gather.getGathered().getType().getNumElements() * 4,
              end = index[&op];
      floats += bytes / 4;
      for (Operation *wait : gather.getGathered().getUsers())
        for (Operation *view : wait->getResult(0).getUsers())
          for (Operation *user : view->getUsers())
            end = std::max(end,
                           index[train.front().findAncestorOpInBlock(*user)]);
      gathers[index[&op]] += bytes;
      gathers[end + 1] -= bytes;
      continue;
    }
    if (isa<AllGatherStartOp>(op)) { // stages 1, 2: the parameters back
      if (BucketPlanAttr plan =
              sharded.lookup(int64_t(cast<AllGatherStartOp>(op).getBucket())))
        floats += plan.getCount();
      continue;
    }
    if (!isa<AllReduceBucketOp, AllReduceStartOp, AllReduceOp,
             ReduceScatterStartOp>(op))
      continue;
    BucketPlanAttr plan = dtc->getBucketPlanAttrHelper().getAttr(&op);
    if (!plan)
      continue;
    // (An all-reduce sends each float twice: a reduce-scatter and an
    // all-gather.)
    floats += plan.getCount() * (isa<ReduceScatterStartOp>(op) ? 1 : 2);
    int64_t bytes = plan.getCount() * 4, first = index[&op], end = n;
    for (Value g : op.getOperands())
      if (Operation *def = g.getDefiningOp())
        first = std::min(first, index[def]);
    if (auto rs = dyn_cast<ReduceScatterStartOp>(op)) {
      if (!rs.getInPlace()) {
        for (Operation *user : rs.getRequest().getUsers())
          end = index[user];
        int64_t shard = rs.getShard().getType().getNumElements() * 4;
        delta[index[&op]] += shard;
        delta[n] -= shard;
      }
    }
    delta[first] += bytes;
    delta[end] -= bytes;
  }
  int64_t live = 0, peak = 0;
  for (auto [at, d] : delta) {
    live += d;
    peak = std::max(peak, live);
  }
  live = 0;
  for (auto [at, d] : gathers) {
    live += d;
    gatheredPeak = std::max(gatheredPeak, live);
  }
  return peak;
}
} // namespace

PlanReport::PlanReport(Operation *op) {
  auto module = cast<ModuleOp>(op);
  DtcDialect *dtc = module->getContext()->getLoadedDialect<DtcDialect>();
  if (RecipeAttr r = dtc->getRecipeAttrHelper().getAttr(module))
    batch = r.getBatch();
  for (ParamOp p : module.getOps<ParamOp>()) {
    PlacementAttr at = dtc->getPlacementAttrHelper().getAttr(p);
    params.push_back({p.getSymName().str(),
                      cast<RankedTensorType>(p.getType()).getNumElements(),
                      at ? at.getOffset() : 0});
  }
  if (PersistentAttr persistent =
          dtc->getPersistentAttrHelper().getAttr(module)) {
    paramBytes = persistent.getParamBytes();
    bufferBytes = persistent.getBufferBytes();
    persistentBytes = persistent.getBytes();
  }
  if (ShardAttr shard = shardOf(module)) {
    shardStage = int64_t(shard.getStage());
    shardRanks = shard.getRanks();
  }
  // Accumulators (gradient accumulation): each parameter's, once.
  llvm::StringSet<> accumulated;
  module.walk([&](Operation *op) {
    if (auto add = dyn_cast<AccumulateGradientOp>(op);
        add && accumulated.insert(add.getParam()).second)
      accumulatorBytes +=
          cast<RankedTensorType>(add.getGrad().getType()).getNumElements() * 4;
  });
  stateBytes = std::max<int64_t>(0, persistentBytes - paramBytes - bufferBytes -
                                        accumulatorBytes);
  for (auto f : module.getOps<func::FuncOp>())
    if (ArenaAttr a = dtc->getArenaAttrHelper().getAttr(f))
      steps.push_back({f.getSymName().str(), a.getPerSample(), a.getFixed(),
                       a.getNaivePerSample(), a.getNaiveFixed()});
  auto train = module.lookupSymbol<func::FuncOp>(steps::kTrain);
  if (!train)
    return;
  gradientBytes = gradientPeak(train, collectiveFloats, gatheredBytes);
  train.walk([&](Operation *op) {
    if (!isa<AllReduceBucketOp, AllReduceStartOp, AllReduceOp,
             ReduceScatterStartOp>(op))
      return;
    BucketPlanAttr plan = dtc->getBucketPlanAttrHelper().getAttr(op);
    auto id = op->getAttrOfType<IntegerAttr>("bucket");
    Bucket bucket{id ? id.getInt() : int64_t(buckets.size()),
                  plan ? plan.getCount() * 4 : 0,
                  {}};
    for (StringRef p : updatedParams(op))
      if (!p.empty())
        bucket.params.push_back(p.str());
    buckets.push_back(std::move(bucket));
  });
  // GEMMs: 2 m n k each. Fused attention: S = Q K^T and O = P V forward (2
  // Tq Tk D each per head), dP = dO V^T, dV = P^T dO, dQ = dS K and dK =
  // dS^T Q backward, counted at the forward op; with a causal mask half of
  // the scores exist. (A backward that recomputes S does more; this counts
  // what the step needs.)
  train.walk([&](Operation *op) {
    if (auto m = dyn_cast<MatmulOp>(op)) {
      work::Gemm g = work::gemm(m, batch);
      gemmFlops += 2.0 * g.m * g.n * g.k;
    }
    convFlops += work::convFlops(op, batch);
    if (std::optional<work::Attention> a = work::attention(op, batch);
        a && !a->gradient)
      attentionFlops +=
          6 * 2.0 * a->heads * a->tq * a->tk * a->dim * (a->causal ? 0.5 : 1.0);
  });
}

namespace {
double sizeAt(int64_t d, int64_t batch) {
  return ShapedType::isDynamic(d) ? double(batch) : double(d);
}
} // namespace

work::Gemm work::gemm(MatmulOp op, int64_t batch) {
  auto a = op.getLhs().getType().getShape();
  double inner = 1;
  if (op.getContractBatch())
    for (int64_t d : a.drop_back())
      inner *= sizeAt(d, batch);
  else
    inner = sizeAt(op.getTransposeLhs() ? a[a.size() - 2] : a.back(), batch);
  double elements = 1;
  for (int64_t d : op.getType().getShape())
    elements *= sizeAt(d, batch);
  const double n = sizeAt(op.getType().getShape().back(), batch);
  return {elements / n, n, inner};
}

double work::convFlops(Operation *op, int64_t batch) {
  auto flops = [&](RankedTensorType x, RankedTensorType w, RankedTensorType y) {
    double perSample = 1;
    for (int64_t d : y.getShape().drop_front())
      perSample *= double(d);
    return 2.0 * sizeAt(x.getDimSize(0), batch) * perSample *
           double(w.getDimSize(1) * w.getDimSize(2) * w.getDimSize(3));
  };
  if (auto c = dyn_cast<Conv2dOp>(op))
    return flops(c.getX().getType(), c.getWeight().getType(), c.getType());
  if (auto c = dyn_cast<Conv2dGradInputOp>(op))
    return flops(c.getType(), c.getWeight().getType(), c.getDy().getType());
  if (auto c = dyn_cast<Conv2dGradWeightOp>(op))
    return flops(c.getX().getType(), c.getResult().getType(),
                 c.getDy().getType());
  return 0;
}

std::optional<work::Attention> work::attention(Operation *op, int64_t batch) {
  // q and k as [..., H, T, D].
  auto make = [&](SmallVector<int64_t> q, SmallVector<int64_t> k, bool causal,
                  bool gradient) {
    double heads = 1;
    for (int64_t d : ArrayRef<int64_t>(q).drop_back(2))
      heads *= sizeAt(d, batch);
    return Attention{heads,
                     sizeAt(q[q.size() - 2], batch),
                     sizeAt(k[k.size() - 2], batch),
                     sizeAt(q.back(), batch),
                     causal,
                     gradient};
  };
  auto headsFirst = [](ArrayRef<int64_t> shape, bool tokensFirst) {
    SmallVector<int64_t> s(shape);
    if (tokensFirst) // [..., T, H, D]
      std::swap(s[s.size() - 3], s[s.size() - 2]);
    return s;
  };
  auto packed = [](ArrayRef<int64_t> shape) { // [..., T, 3, H, D]
    SmallVector<int64_t> s(shape);
    s.erase(s.end() - 3);
    std::swap(s[s.size() - 3], s[s.size() - 2]);
    return s;
  };
  auto separate = [&](auto a, bool gradient) {
    return make(headsFirst(a.getQ().getType().getShape(), a.getTokensFirst()),
                headsFirst(a.getK().getType().getShape(), a.getTokensFirst()),
                a.getCausal(), gradient);
  };
  if (auto a = dyn_cast<AttentionOp>(op))
    return separate(a, false);
  if (auto a = dyn_cast<AttentionGradOp>(op))
    return separate(a, true);
  if (auto a = dyn_cast<AttentionQkvPackedOp>(op)) {
    SmallVector<int64_t> q = packed(a.getQkv().getType().getShape());
    return make(q, q, a.getCausal(), false);
  }
  if (auto a = dyn_cast<AttentionQkvPackedGradOp>(op)) {
    SmallVector<int64_t> q = packed(a.getQkv().getType().getShape());
    return make(q, q, a.getCausal(), true);
  }
  return std::nullopt;
}

int64_t PlanReport::peakArena() const {
  int64_t peak = 0;
  for (const Step &s : steps)
    peak = std::max(peak, s.perSample * batch + s.fixed);
  return peak;
}

int64_t PlanReport::allocatedArena() const {
  int64_t fixed = 0, perSample = 0;
  for (const Step &s : steps) {
    if (s.name == steps::kGrad) // (--gradcheck's only)
      continue;
    fixed = std::max(fixed, s.fixed);
    perSample = std::max(perSample, s.perSample);
  }
  return fixed + kDefaultAlignment + perSample * batch + 64;
}

void PlanReport::print(llvm::raw_ostream &os) const {
  int64_t elems = 0;
  os << "parameters:\n";
  for (const Param &p : params) {
    os << llvm::format("  %-24s %10lld floats  offset %lld\n", p.name.c_str(),
                       (long long)p.floats, (long long)p.offset);
    elems += p.floats;
  }
  os << llvm::format("  %lld parameters, %lld floats (%lld bytes)\n",
                     (long long)params.size(), (long long)elems,
                     (long long)elems * 4);
  os << llvm::format(
      "persistent block: %lld bytes (parameters %lld + optimizer state)\n",
      (long long)persistentBytes, (long long)paramBytes);
  os << "arena (batch " << batch << "):\n";
  for (const Step &s : steps) {
    int64_t planned = s.perSample * batch + s.fixed;
    int64_t naive = s.naivePerSample * batch + s.naiveFixed;
    os << llvm::format("  @%-12s %7lld B/sample + %9lld B = %10lld bytes "
                       "(without reuse %10lld, saved %.0f%%)\n",
                       s.name.c_str(), (long long)s.perSample,
                       (long long)s.fixed, (long long)planned, (long long)naive,
                       naive ? 100.0 * (naive - planned) / naive : 0.0);
  }
  int64_t total = 0;
  for (const Bucket &b : buckets) {
    if (&b == &buckets.front())
      os << (shardStage ? "gradient buckets (reduce-scatter order):\n"
                        : "gradient buckets (all-reduce order):\n");
    os << llvm::format("  bucket %-3lld %10lld bytes:", (long long)b.id,
                       (long long)b.bytes);
    for (const std::string &p : b.params)
      os << " " << p;
    os << "\n";
    total += b.bytes;
  }
  if (!buckets.empty() && shardStage)
    os << llvm::format("reduce-scatter and all-gather per step: %lld bytes "
                       "each in %d bucket(s), padded to %lld shards; each "
                       "rank sends (N-1)/N of each: %lld bytes in all\n",
                       (long long)total, (int)buckets.size(),
                       (long long)shardRanks,
                       (long long)sentPerStep(shardRanks));
  else if (!buckets.empty())
    os << llvm::format("all-reduce per step: %lld bytes in %d bucket(s); a "
                       "ring all-reduce sends 2(N-1)/N of it per rank: %lld "
                       "bytes at 2 ranks, %lld at 8\n",
                       (long long)total, (int)buckets.size(), (long long)total,
                       (long long)(total * 14 / 8));
  os << llvm::format("GEMM FLOPs per training step (batch %lld): %.0f\n",
                     (long long)batch, gemmFlops);
  if (convFlops > 0)
    os << llvm::format(
        "convolution FLOPs per training step (batch %lld): %.0f\n",
        (long long)batch, convFlops);
  if (attentionFlops > 0)
    os << llvm::format("attention FLOPs per training step (batch %lld): %.0f\n",
                       (long long)batch, attentionFlops);
  os << llvm::format(
      "peak memory of a step: %lld bytes (arena) + %lld bytes (persistent)\n",
      (long long)peakArena(), (long long)persistentBytes);
  os << llvm::format("per-rank allocation (batch %lld): persistent %lld + "
                     "arena %lld = %lld bytes\n",
                     (long long)batch, (long long)persistentBytes,
                     (long long)allocatedArena(), (long long)rankBytes());
  // (The arena's batched part: what a step keeps from forward for backward
  // and the gradients of those values; recomputation shrinks it.)
  for (const Step &s : steps)
    if (s.name == "train_step")
      os << llvm::format("activations of a training step: %lld bytes a sample "
                         "= %lld at batch %lld (the arena's batched part)\n",
                         (long long)s.perSample,
                         (long long)(s.perSample * batch), (long long)batch);
}

LogicalResult dtc::printShardingReport(ModuleOp frontEnd,
                                       const PipelineOptions &options,
                                       int64_t ranks, llvm::raw_ostream &os) {
  MLIRContext *ctx = frontEnd.getContext();
  DtcDialect *dialect = ctx->getLoadedDialect<DtcDialect>();
  ShardAttr shard = dialect->getShardAttrHelper().getAttr(frontEnd);
  const ShardStage program = shard ? shard.getStage() : ShardStage::None;
  SmallVector<int64_t> worlds{1, 2, 4, 8};
  if (ranks > 0 && !llvm::is_contained(worlds, ranks))
    worlds.push_back(ranks);
  const ShardStage stages[] = {ShardStage::None, ShardStage::Optimizer,
                               ShardStage::Gradients, ShardStage::Parameters};
  const char *names[] = {"replicated", "1 optimizer", "2 gradients",
                         "3 parameters"};
  auto mb = [](int64_t bytes) { return double(bytes) / 1048576.0; };
  os << "per-rank memory by stage and world size (MiB; each planned as "
        "compiled; arena: activations, gradients and gathered parameters, of "
        "which gradients and gathered at most; total: what a rank "
        "allocates):\n";
  os << llvm::format("  %-12s %5s %10s %10s %10s %10s %10s %10s %10s %12s\n",
                     "stage", "ranks", "params", "opt state", "gradients",
                     "gathered", "arena", "persistent", "total", "sent/step");
  for (auto [stage, name] : llvm::zip(stages, names))
    for (int64_t world : worlds) {
      OwningOpRef<ModuleOp> m = frontEnd.clone();
      dialect->getShardAttrHelper().setAttr(
          *m,
          ShardAttr::get(ctx, stage, stage == ShardStage::None ? 0 : world));
      PassManager pm(ctx);
      PipelineOptions o;
      o.copyOptionValuesFrom(options);
      buildPipeline(pm, o);
      std::string error;
      {
        ScopedDiagnosticHandler quiet(ctx, [&](Diagnostic &d) {
          if (d.getSeverity() == DiagnosticSeverity::Error && error.empty())
            error = d.str();
          return success();
        });
        if (failed(pm.run(*m))) {
          os << llvm::format("  %-12s %5lld  cannot be planned: %s\n", name,
                             (long long)world, error.c_str());
          continue;
        }
      }
      PlanReport r(*m);
      os << llvm::format(
          "  %-12s %5lld %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f "
          "%12.2f%s\n",
          name, (long long)world, mb(r.paramBytes), mb(r.stateBytes),
          mb(r.gradientBytes), mb(r.gatheredBytes), mb(r.peakArena()),
          mb(r.persistentBytes), mb(r.rankBytes()), mb(r.sentPerStep(world)),
          stage == program && world == ranks ? "  <- this program" : "");
    }
  return success();
}

namespace {
struct ReportPass : public dtc::impl::ReportBase<ReportPass> {
  void runOnOperation() override {
    getAnalysis<PlanReport>().print(llvm::outs());
    markAllAnalysesPreserved();
  }
};
} // namespace
