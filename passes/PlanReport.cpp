//===- PlanReport.cpp - The compile-time plan, and the dtc-report pass ----===//
#include "passes/PlanReport.h"
#include "passes/Passes.h"
#include "passes/Steps.h"

#include "llvm/Support/Format.h"

namespace dtc {
#define GEN_PASS_DEF_REPORT
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

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
    persistentBytes = persistent.getBytes();
  }
  for (auto f : module.getOps<func::FuncOp>())
    if (ArenaAttr a = dtc->getArenaAttrHelper().getAttr(f))
      steps.push_back({f.getSymName().str(), a.getPerSample(), a.getFixed(),
                       a.getNaivePerSample(), a.getNaiveFixed()});
  auto train = module.lookupSymbol<func::FuncOp>(steps::kTrain);
  if (!train)
    return;
  train.walk([&](Operation *op) {
    if (!isa<AllReduceBucketOp, AllReduceStartOp, AllReduceOp>(op))
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
  train.walk([&](MatmulOp m) {
    auto a = m.getLhs().getType().getShape();
    auto size = [&](int64_t d) {
      return ShapedType::isDynamic(d) ? double(batch) : double(d);
    };
    // 2 x the result's elements x the inner dimension (every leading
    // position's, summed, under contract_batch).
    double inner = 1;
    if (m.getContractBatch())
      for (int64_t d : a.drop_back())
        inner *= size(d);
    else
      inner = size(m.getTransposeLhs() ? a[a.size() - 2] : a.back());
    double elements = 1;
    for (int64_t d : m.getType().getShape())
      elements *= size(d);
    gemmFlops += 2.0 * elements * inner;
  });
  // Fused attention: S = Q K^T and O = P V forward (2 Tq Tk D each per
  // head), dP = dO V^T, dV = P^T dO, dQ = dS K and dK = dS^T Q backward;
  // with a causal mask half of the scores exist. (A backward that
  // recomputes S does more; this counts what the step needs.)
  auto countAttention = [&](SmallVector<int64_t> q, SmallVector<int64_t> k,
                            bool causal) {
    auto size = [&](int64_t d) {
      return ShapedType::isDynamic(d) ? double(batch) : double(d);
    };
    double heads = 1;
    for (int64_t d : ArrayRef<int64_t>(q).drop_back(2))
      heads *= size(d);
    const double tq = size(q[q.size() - 2]), tk = size(k[k.size() - 2]),
                 dim = size(q.back());
    attentionFlops += 6 * 2.0 * heads * tq * tk * dim * (causal ? 0.5 : 1.0);
  };
  train.walk([&](AttentionOp a) {
    SmallVector<int64_t> q(a.getQ().getType().getShape()),
        k(a.getK().getType().getShape());
    if (a.getTokensFirst()) // [..., T, H, D]: as [..., H, T, D]
      for (auto *s : {&q, &k})
        std::swap((*s)[s->size() - 3], (*s)[s->size() - 2]);
    countAttention(q, k, a.getCausal());
  });
  train.walk([&](AttentionQkvPackedOp a) {
    // [..., T, 3, H, D]: q, k and v each as [..., H, T, D].
    SmallVector<int64_t> q(a.getQkv().getType().getShape());
    q.erase(q.end() - 3);
    std::swap(q[q.size() - 3], q[q.size() - 2]);
    countAttention(q, q, a.getCausal());
  });
  // A convolution and each of its gradients: 2 N O Ho Wo (C / groups) kH kW
  // (O Ho Wo: a sample's elements of y, in any layout).
  auto convFlopsOf = [&](RankedTensorType x, RankedTensorType w,
                         RankedTensorType y) {
    double n = ShapedType::isDynamic(x.getDimSize(0)) ? double(batch)
                                                      : double(x.getDimSize(0));
    double perSample = 1;
    for (int64_t d : y.getShape().drop_front())
      perSample *= double(d);
    convFlops += 2.0 * n * perSample *
                 double(w.getDimSize(1) * w.getDimSize(2) * w.getDimSize(3));
  };
  train.walk([&](Operation *op) {
    if (auto c = dyn_cast<Conv2dOp>(op))
      convFlopsOf(c.getX().getType(), c.getWeight().getType(), c.getType());
    else if (auto c = dyn_cast<Conv2dGradInputOp>(op))
      convFlopsOf(c.getType(), c.getWeight().getType(), c.getDy().getType());
    else if (auto c = dyn_cast<Conv2dGradWeightOp>(op))
      convFlopsOf(c.getX().getType(), c.getResult().getType(),
                  c.getDy().getType());
  });
}

int64_t PlanReport::peakArena() const {
  int64_t peak = 0;
  for (const Step &s : steps)
    peak = std::max(peak, s.perSample * batch + s.fixed);
  return peak;
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
      os << "gradient buckets (all-reduce order):\n";
    os << llvm::format("  bucket %-3lld %10lld bytes:", (long long)b.id,
                       (long long)b.bytes);
    for (const std::string &p : b.params)
      os << " " << p;
    os << "\n";
    total += b.bytes;
  }
  if (!buckets.empty())
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
}

namespace {
struct ReportPass : public dtc::impl::ReportBase<ReportPass> {
  void runOnOperation() override {
    getAnalysis<PlanReport>().print(llvm::outs());
    markAllAnalysesPreserved();
  }
};
} // namespace
