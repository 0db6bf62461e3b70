//===- CostModel.cpp - The cost model, and the dtc-predict pass -----------===//
#include "passes/CostModel.h"
#include "passes/Passes.h"
#include "passes/PlanReport.h"
#include "passes/Steps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include <algorithm>
#include <cmath>
#include <map>

namespace dtc {
#define GEN_PASS_DEF_PREDICT
#include "passes/Passes.h.inc"
} // namespace dtc

using namespace mlir;
using namespace dtc;

//===--- the machine
//--------------------------------------------------------===//

namespace {
/// Seconds at `size` from points sorted by size: linear between them (exact
/// for a latency plus bytes over a bandwidth), the smallest's below them (a
/// kernel's fixed cost), in proportion to the largest's above them.
double interpolate(ArrayRef<Machine::Point> points, double size) {
  if (points.empty() || size <= 0)
    return 0;
  if (size <= points.front().size)
    return points.front().seconds;
  if (size >= points.back().size)
    return points.back().seconds * size / points.back().size;
  auto hi =
      llvm::upper_bound(points, size, [](double s, const Machine::Point &p) {
        return s < p.size;
      });
  const Machine::Point &a = *std::prev(hi), &b = *hi;
  const double t = (size - a.size) / (b.size - a.size);
  return a.seconds + t * (b.seconds - a.seconds);
}

void sortPoints(SmallVectorImpl<Machine::Point> &points) {
  llvm::sort(points, [](const Machine::Point &a, const Machine::Point &b) {
    return a.size < b.size;
  });
}
} // namespace

Machine Machine::defaults(int64_t ranks) {
  // A core of a current x86 server with one thread a rank: sgemm at up to
  // 60 GFLOP/s (less on small or thin shapes), 12 GB/s through a streaming
  // kernel with 2 us to start one, shared-memory MPI at 25 us and 4 GB/s a
  // step of its rings.
  Machine m;
  m.ranks = std::max<int64_t>(1, ranks);
  m.processBytes = 32 << 20;
  for (int64_t a : {16, 64, 256, 1024, 4096})
    for (int64_t b : {16, 64, 256, 1024, 4096})
      for (int64_t c : {16, 64, 256, 1024, 4096}) {
        const double smallest = double(std::min({a, b, c}));
        const double efficiency = std::min(1.0, std::sqrt(smallest / 256.0));
        m.gemm.push_back(
            {a, b, c, 2.0 * a * b * c / (60e9 * efficiency) + 2e-6});
      }
  for (double flops = 1e5; flops <= 1e11; flops *= 10)
    m.conv.push_back({flops, flops / 40e9 + 20e-6});
  for (double bytes = 1024; bytes <= 64.0 * 1048576; bytes *= 4)
    m.elementwise.push_back({bytes, 2e-6 + bytes / 12e9});
  const double n = double(m.ranks), share = (n - 1) / n;
  for (double bytes = 4096; bytes <= 64.0 * 1048576; bytes *= 4) {
    if (m.ranks == 1) {
      for (auto &c : m.collectives)
        c.push_back({bytes, 1e-6});
      continue;
    }
    m.collectives[int(Collective::AllReduce)].push_back(
        {bytes, 2 * 25e-6 * (n - 1) + 2 * share * bytes / 4e9});
    for (Collective c : {Collective::ReduceScatter, Collective::AllGather})
      m.collectives[int(c)].push_back(
          {bytes, 25e-6 * (n - 1) + share * bytes / 4e9});
  }
  return m;
}

std::optional<Machine> Machine::load(StringRef path, std::string &error) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    error = "cannot read '" + path.str() + "': " + file.getError().message();
    return std::nullopt;
  }
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*file)->getBuffer());
  if (!parsed) {
    error = "'" + path.str() +
            "' is not JSON: " + llvm::toString(parsed.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *root = parsed->getAsObject();
  auto bad = [&](const Twine &what) {
    error = ("'" + path +
             "' is not a machine description (train --calibrate "
             "writes them): " +
             what)
                .str();
    return std::nullopt;
  };
  if (!root || root->getString("format") != "dtc-machine/1")
    return bad("its \"format\" is not \"dtc-machine/1\"");
  Machine m;
  m.source = path.str();
  m.ranks = root->getInteger("ranks").value_or(0);
  m.threads = root->getInteger("threads").value_or(1);
  // (The ranks on one machine: "machine_ranks", else MPI's "local_ranks" of
  // files before it, else 1.)
  m.machineRanks = root->getInteger("machine_ranks")
                       .value_or(root->getInteger("local_ranks").value_or(1));
  m.deferredStarts = root->getBoolean("deferred_starts").value_or(false);
  m.processBytes = root->getInteger("process_bytes").value_or(0);
  if (m.ranks < 1)
    return bad("\"ranks\" must be a number >= 1");
  for (StringRef key : {"local_ranks", "machine_ranks"})
    if (root->get(key)) {
      std::optional<int64_t> n = root->getInteger(key);
      if (!n || *n < 1 || *n > m.ranks)
        return bad("\"" + key + "\" must be a number from 1 to \"ranks\"");
    }
  // (Optional: files written before it have none.)
  if (const llvm::json::Value *c = root->get("contention")) {
    const llvm::json::Object *o = c->getAsObject();
    std::pair<StringRef, double *> factors[] = {
        {"compute", &m.compute},
        {"compute_communicating", &m.computeCommunicating}};
    for (auto [key, into] : factors) {
      std::optional<double> f = o ? o->getNumber(key) : std::nullopt;
      if (!f || !(*f >= 1) || !std::isfinite(*f))
        return bad("\"contention\" needs \"" + key + "\" >= 1");
      *into = *f;
    }
    if (o && o->get("communication")) { // (optional: later than the others)
      std::optional<double> f = o->getNumber("communication");
      if (!f || !(*f >= 1) || !std::isfinite(*f))
        return bad("\"contention\" needs \"communication\" >= 1");
      m.communication = *f;
    }
    if (o && o->get("sustained_gemm_256")) { // (optional: later still)
      std::optional<double> f = o->getNumber("sustained_gemm_256");
      if (!f || !(*f > 0) || !std::isfinite(*f))
        return bad("\"contention\" needs \"sustained_gemm_256\" > 0");
      m.sustainedGemm = *f;
    }
    // An optional list of {"alone": s, "<second>": t}, each pair valid
    // (s > 0, both finite, and `valid`), as points (s, t), sorted.
    auto pairs = [&](StringRef name, StringRef second,
                     function_ref<bool(double, double)> valid, StringRef need,
                     SmallVectorImpl<Point> &out) -> bool {
      const llvm::json::Value *v = o ? o->get(name) : nullptr;
      if (!v)
        return true;
      const llvm::json::Array *list = v->getAsArray();
      if (!list) {
        bad("\"" + name + "\" must be a list");
        return false;
      }
      for (const llvm::json::Value &e : *list) {
        const llvm::json::Object *p = e.getAsObject();
        std::optional<double> alone = p ? p->getNumber("alone") : std::nullopt,
                              t = p ? p->getNumber(second) : std::nullopt;
        if (!alone || !t || !(*alone > 0) || !std::isfinite(*alone) ||
            !std::isfinite(*t) || !valid(*alone, *t)) {
          bad("every entry of \"" + name + "\" needs \"alone\" > 0 and " +
              need);
          return false;
        }
        out.push_back({*alone, *t});
      }
      sortPoints(out);
      return true;
    };
    // (Optional: later still.) Each {"alone": s, "factor": f}, f >= 1; each
    // {"bytes": b, "alone": s, "beside": t}, t >= s.
    if (!pairs(
            "compute_rounds", "factor", [](double, double f) { return f >= 1; },
            "\"factor\" >= 1", m.computeRounds) ||
        !pairs(
            "communication_beside", "beside",
            [](double s, double t) { return t >= s; },
            "\"beside\" >= \"alone\"", m.beside))
      return std::nullopt;
  }
  // A list of {"<size key>": x, "seconds": t}, every t > 0.
  auto points = [&](const llvm::json::Object *in, StringRef name,
                    StringRef sizeKey, SmallVectorImpl<Point> &out) -> bool {
    const llvm::json::Array *list = in ? in->getArray(name) : nullptr;
    if (!list || list->empty()) {
      bad("\"" + name + "\" must be a non-empty list");
      return false;
    }
    for (const llvm::json::Value &v : *list) {
      const llvm::json::Object *o = v.getAsObject();
      std::optional<double> size = o ? o->getNumber(sizeKey) : std::nullopt;
      std::optional<double> s = o ? o->getNumber("seconds") : std::nullopt;
      if (!size || !s || !(*size > 0) || !(*s > 0) || !std::isfinite(*s)) {
        bad("every entry of \"" + name + "\" needs \"" + sizeKey +
            "\" and \"seconds\" > 0");
        return false;
      }
      out.push_back({*size, *s});
    }
    sortPoints(out);
    return true;
  };
  if (!points(root, "conv", "flops", m.conv) ||
      !points(root, "elementwise", "bytes", m.elementwise))
    return std::nullopt;
  if (const llvm::json::Value *u = root->get("updates")) { // (optional)
    const llvm::json::Object *o = u->getAsObject();
    const char *updates[] = {"sgd", "sgd_momentum", "adam"};
    for (int states = 0; states < 3; ++states)
      if (!o || !points(o, updates[states], "bytes", m.updates[states]))
        return o ? std::nullopt
                 : bad("\"updates\" must be an object of \"sgd\", "
                       "\"sgd_momentum\" and \"adam\" lists");
  }
  // (Optional, and each list in it: the lists dtc knows are read, others
  // left alone.)
  auto lists = [&](const llvm::json::Object *o, StringRef name,
                   llvm::StringMap<SmallVector<Point>> &into) -> bool {
    if (!o) {
      bad("\"" + name + "\" must be an object of lists");
      return false;
    }
    for (const auto &entry : *o)
      if (!points(o, entry.first, "bytes", into[entry.first.str()]))
        return false;
    return true;
  };
  if (const llvm::json::Value *n = root->get("norms"))
    if (!lists(n->getAsObject(), "norms", m.norms))
      return std::nullopt;
  // An optional cold measurement, {"bytes": b > 0, "<inner>": ...}: the
  // object (nullptr where there is none, or on failure, `failed` set), its
  // bytes into `bytes`.
  bool failed = false;
  auto cold = [&](StringRef name, StringRef inner,
                  double &bytes) -> const llvm::json::Object * {
    const llvm::json::Value *c = root->get(name);
    if (!c)
      return nullptr;
    const llvm::json::Object *o = c->getAsObject();
    std::optional<double> b = o ? o->getNumber("bytes") : std::nullopt;
    if (!b || !(*b > 0)) {
      bad("\"" + name + "\" must be an object of \"bytes\" > 0 and \"" + inner +
          "\"");
      failed = true;
      return nullptr;
    }
    bytes = *b;
    return o;
  };
  if (const llvm::json::Object *o =
          cold("norms_cold", "lists", m.normsColdBytes))
    failed = !lists(o->getObject("lists"), "lists", m.normsCold);
  if (failed)
    return std::nullopt;
  const llvm::json::Object *collectives = root->getObject("collectives");
  if (!collectives)
    return bad("\"collectives\" must be an object");
  const char *names[] = {"all_reduce", "reduce_scatter", "all_gather"};
  for (int c = 0; c < 3; ++c)
    if (!points(collectives, names[c], "bytes", m.collectives[c]))
      return std::nullopt;
  if (root->get("collectives_cold")) { // (optional)
    const llvm::json::Object *cold = root->getObject("collectives_cold");
    if (!cold)
      return bad("\"collectives_cold\" must be an object");
    for (int c = 0; c < 3; ++c)
      if (!points(cold, names[c], "bytes", m.collectivesCold[c]))
        return std::nullopt;
  }
  // A non-empty list of {"m", "n", "k", "seconds"}.
  auto shapes = [&](const llvm::json::Array *list, StringRef name,
                    SmallVectorImpl<Machine::GemmPoint> &out) -> bool {
    if (!list || list->empty()) {
      bad("\"" + name + "\" must be a non-empty list");
      return false;
    }
    for (const llvm::json::Value &v : *list) {
      const llvm::json::Object *o = v.getAsObject();
      std::optional<int64_t> a = o ? o->getInteger("m") : std::nullopt,
                             b = o ? o->getInteger("n") : std::nullopt,
                             c = o ? o->getInteger("k") : std::nullopt;
      std::optional<double> s = o ? o->getNumber("seconds") : std::nullopt;
      if (!a || !b || !c || *a < 1 || *b < 1 || *c < 1 || !s || !(*s > 0)) {
        bad("every entry of \"" + name +
            "\" needs \"m\", \"n\", \"k\" >= 1 and \"seconds\" > 0");
        return false;
      }
      out.push_back({*a, *b, *c, *s});
    }
    return true;
  };
  if (!shapes(root->getArray("gemm"), "gemm", m.gemm))
    return std::nullopt;
  if (const llvm::json::Object *o =
          cold("gemm_cold", "shapes", m.gemmColdBytes))
    failed = !shapes(o->getArray("shapes"), "shapes", m.gemmCold);
  if (failed)
    return std::nullopt;
  return m;
}

double Machine::coldShare(double own, double meets, double coldBytes) {
  if (coldBytes <= 0 || meets <= own || own <= 0)
    return 0;
  const double far = std::max(coldBytes, 2 * own);
  return std::clamp(std::log2(meets / own) / std::log2(far / own), 0.0, 1.0);
}

double Machine::gemmSeconds(double m, double n, double k, double meets) const {
  const double hot = tableSeconds(gemm, m, n, k);
  const double f = gemmCold.empty() ? 0
                                    : coldShare(4 * (m * k + k * n + m * n),
                                                meets, gemmColdBytes);
  return f == 0 ? hot : hot + f * (tableSeconds(gemmCold, m, n, k) - hot);
}

double Machine::tableSeconds(ArrayRef<GemmPoint> gemm, double m, double n,
                             double k) {
  if (gemm.empty() || m <= 0 || n <= 0 || k <= 0)
    return 0;
  // The rate (FLOP/s) of the measured shapes nearest in log2(m, n, k), the
  // query clamped to the measured range, weighted by inverse squared
  // distance over the 8 nearest.
  double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {0, 0, 0};
  for (const GemmPoint &p : gemm) {
    const double d[3] = {double(p.m), double(p.n), double(p.k)};
    for (int i = 0; i < 3; ++i) {
      lo[i] = std::min(lo[i], d[i]);
      hi[i] = std::max(hi[i], d[i]);
    }
  }
  const double q[3] = {std::log2(std::clamp(m, lo[0], hi[0])),
                       std::log2(std::clamp(n, lo[1], hi[1])),
                       std::log2(std::clamp(k, lo[2], hi[2]))};
  SmallVector<std::pair<double, double>> near; // (distance^2, log rate)
  for (const GemmPoint &p : gemm) {
    const double dm = std::log2(double(p.m)) - q[0],
                 dn = std::log2(double(p.n)) - q[1],
                 dk = std::log2(double(p.k)) - q[2];
    near.push_back(
        {dm * dm + dn * dn + dk * dk,
         std::log(2.0 * double(p.m) * double(p.n) * double(p.k) / p.seconds)});
  }
  llvm::sort(near, [](auto &a, auto &b) { return a.first < b.first; });
  near.resize(std::min<size_t>(near.size(), 8));
  double weights = 0, sum = 0;
  for (auto [d2, logRate] : near) {
    const double w = 1.0 / ((d2 + 0.01) * (d2 + 0.01));
    weights += w;
    sum += w * logRate;
  }
  // A shape below the measured ones takes the smallest measured shape's
  // time at most (what a call costs).
  const double seconds = 2.0 * m * n * k / std::exp(sum / weights);
  double floor = 1e300;
  for (const GemmPoint &p : gemm)
    floor = std::min(floor, p.seconds);
  return std::max(seconds, std::min(floor, seconds * 4));
}

double Machine::convSeconds(double flops) const {
  return interpolate(conv, flops);
}

double Machine::elementwiseSeconds(double bytes) const {
  return interpolate(elementwise, bytes);
}

std::optional<double> Machine::updateSeconds(int64_t states,
                                             double bytes) const {
  if (states < 0 || states > 2 || updates[states].empty())
    return std::nullopt;
  return interpolate(updates[states], bytes);
}

std::optional<double> Machine::normSeconds(StringRef name, double bytes,
                                           double own, double meets) const {
  auto it = norms.find(name);
  if (it == norms.end())
    return std::nullopt;
  const double hot = interpolate(it->second, bytes);
  auto cold = normsCold.find(name);
  const double f =
      cold == normsCold.end() ? 0 : coldShare(own, meets, normsColdBytes);
  return f == 0 ? hot : hot + f * (interpolate(cold->second, bytes) - hot);
}

double Machine::collectiveSeconds(Collective kind, double bytes,
                                  bool afterCompute) const {
  const auto &cold = collectivesCold[int(kind)];
  return ranks <= 1 ? 0
                    : interpolate(afterCompute && !cold.empty()
                                      ? cold
                                      : collectives[int(kind)],
                                  bytes);
}

double Machine::computeFactor(double alone) const {
  if (computeRounds.empty())
    return compute;
  if (alone <= computeRounds.front().size)
    return computeRounds.front().seconds;
  if (alone >= computeRounds.back().size)
    return computeRounds.back().seconds;
  return interpolate(computeRounds, alone);
}

double Machine::besideFactor(double alone) const {
  if (beside.empty() || alone <= 0)
    return communication;
  const Point &first = beside.front(), &last = beside.back();
  if (alone <= first.size)
    return first.seconds / first.size;
  double seconds;
  if (alone >= last.size) {
    double slope = last.seconds / last.size;
    if (beside.size() > 1) {
      const Point &before = beside[beside.size() - 2];
      slope = (last.seconds - before.seconds) / (last.size - before.size);
    }
    seconds = last.seconds + std::max(1.0, slope) * (alone - last.size);
  } else {
    seconds = interpolate(beside, alone);
  }
  return std::max(1.0, seconds / alone);
}

//===--- the step
//-----------------------------------------------------------===//

namespace {
struct StepModel {
  const Machine &machine;
  int64_t batch, states;
  // What a kernel's operands meet in the host's caches between two uses of
  // them: the step's persistent block, arena and batch, on every rank the
  // machine runs (Machine::machineRanks: they share its last-level cache).
  double meets = 0;
  DenseMap<int64_t, int64_t> bucketFloats{}; // a sharded bucket's floats
  DenseMap<Operation *, double> factors{};   // a kernel's (segmentFactors)

  double size(int64_t d) const {
    return ShapedType::isDynamic(d) ? double(batch) : double(d);
  }
  double elements(Type t) const {
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (!tensor)
      return 0;
    double n = 1;
    for (int64_t d : tensor.getShape())
      n *= size(d);
    return n;
  }
  double bytes(Type t) const { return 4 * elements(t); }
  double bytesOf(ValueRange values) const {
    double b = 0;
    for (Value v : values)
      b += bytes(v.getType());
    return b;
  }

  /// A normalization's or pooling's seconds where the machine measured its
  /// kernel (Machine::norms): batch norm (its gradient fused with a max
  /// pooling's as batch_norm_grad_max_pool) and max pooling of 4-D NCHW or
  /// 5-D blocked (nChw16c) tensors, at the measured 2x2 window whatever
  /// theirs; layer norm. Channels-last ones and other ranks are priced as
  /// the other memory-bound kernels.
  std::optional<double> normSeconds(Operation *op) const {
    auto x = dyn_cast<RankedTensorType>(
        op->getNumOperands() ? op->getOperand(0).getType() : Type());
    if (!x || op->hasAttr("channels_last"))
      return std::nullopt;
    std::string name = op->getName().stripDialect().str();
    // (What it reads and writes: for where it lies between norms and
    // norms_cold.)
    const double own = bytesOf(op->getOperands()) + bytesOf(op->getResults());
    if (isa<LayerNormOp, LayerNormGradOp>(op))
      return machine.normSeconds(name, bytes(x), own, meets);
    if (!isa<BatchNormOp, BatchNormGradOp, MaxPool2dOp, MaxPool2dGradOp>(op))
      return std::nullopt;
    if (auto grad = dyn_cast<BatchNormGradOp>(op); grad && grad.getPoolKernel())
      name += "_max_pool";
    if (x.getRank() == 5)
      name += "_blocked";
    else if (x.getRank() != 4)
      return std::nullopt;
    return machine.normSeconds(name, bytes(x), own, meets);
  }

  /// The seconds of a kernel that is not a collective.
  double kernelSeconds(Operation *op) const {
    if (isa<ParamRefOp, ConstantOp, ReshapeOp, ParamViewOp, BatchSizeOp,
            GradSeedOp, ArangeOp>(op))
      return 0;
    if (auto mm = dyn_cast<MatmulOp>(op)) {
      work::Gemm g = work::gemm(mm, batch);
      return machine.gemmSeconds(g.m, g.n, g.k, meets);
    }
    if (double flops = work::convFlops(op, batch); flops > 0)
      return machine.convSeconds(flops);
    // Attention: per head, two products of [Tq, D] x [D, Tk] forward and
    // four (and the scores again) backward, half of them under a causal
    // mask; each at the rate of a GEMM of its shape.
    if (std::optional<work::Attention> a = work::attention(op, batch))
      return a->heads * (a->gradient ? 5.0 : 2.0) * (a->causal ? 0.5 : 1.0) *
             machine.gemmSeconds(a->tq, a->tk, a->dim, meets);
    // Normalizations and poolings the machine measured (its "norms"), by
    // their input's bytes.
    if (std::optional<double> t = normSeconds(op))
      return *t;
    // The other memory-bound kernels: the time calibration's streaming loop
    // takes to move their bytes, times what the runtime's kernels were measured
    // to take more than it (--trace against dtc --report, the CNN and the GPT
    // on an AMD EPYC: updates, embeddings, fused chains and reductions about
    // 3x, normalizations and softmaxes 3-5x, pooling 8x).
    const double factor =
        isa<MaxPool2dOp, MaxPool2dGradOp, AvgPool2dOp, AvgPool2dGradOp>(op)
            ? 8.0
        : isa<LayerNormOp, LayerNormGradOp, RmsNormOp, RmsNormGradOp,
              BatchNormOp, BatchNormGradOp, SoftmaxOp, LogSoftmaxOp,
              SoftmaxGradOp, LogSoftmaxGradOp>(op)
            ? 5.0
            : 3.0;
    auto moving = [&](double bytes) {
      return factor * machine.elementwiseSeconds(bytes);
    };
    // The updates: each gradient element read, its parameter and optimizer
    // state read and written. Where the machine measured the optimizer's
    // own kernel, at its rate over the working set the update meets: the
    // calibration repeats it on the same arrays (the parameter, gradient
    // and states: (2 + states) / perElement of the bytes it moves), a step
    // touches all of its memory between two updates (the seed MLP's 5 MB
    // stay in the caches, its update twice the streaming loop's rate; the
    // GPT's 45 MB do not).
    const double perElement = 3 + 2 * double(states);
    auto updating = [&](double elementBytes) {
      const double moved = elementBytes * perElement;
      const double arrays = 2 + double(states);
      const double loop = std::max(moved, meets * perElement / arrays);
      if (std::optional<double> t = machine.updateSeconds(states, loop))
        return moved / loop * *t;
      return moving(moved);
    };
    // update_running_stats: the batch's statistics read, the running ones
    // read and written (x only counts its elements).
    if (isa<UpdateRunningStatsOp>(op))
      return moving(3 * bytesOf(op->getOperands().drop_front()));
    if (auto u = dyn_cast<UpdateGroupOp>(op))
      return updating(bytesOf(u.getGrads()));
    if (isa<ApplyGradientOp>(op))
      return updating(bytesOf(op->getOperands()));
    if (auto u = dyn_cast<ShardUpdateOp>(op))
      return updating(bytes(u.getShard().getType()));
    if (auto e = dyn_cast<EmbeddingOp>(op)) // the rows read, once each
      return moving(2 * bytes(e.getType()));
    if (auto e = dyn_cast<EmbeddingGradOp>(op)) // the table zeroed, rows added
      return moving(bytes(e.getType()) + 2 * bytesOf(op->getOperands()) -
                    bytes(op->getOperand(0).getType()));
    // Anything else (a fused chain, a reduction, a loss, a copy): its
    // operands read and its results written once.
    return moving(bytesOf(op->getOperands()) + bytesOf(op->getResults()));
  }

  /// The bytes a collective carries (a sharded one: the whole bucket).
  double collectiveBytes(Operation *op) const {
    auto *dtc = op->getContext()->getLoadedDialect<DtcDialect>();
    if (BucketPlanAttr plan = dtc->getBucketPlanAttrHelper().getAttr(op))
      return 4.0 * double(plan.getCount());
    if (auto g = dyn_cast<AllGatherStartOp>(op))
      return 4.0 * double(bucketFloats.lookup(int64_t(g.getBucket())));
    if (auto g = dyn_cast<GatherParamsStartOp>(op))
      return bytes(g.getGathered().getType());
    return bytesOf(op->getOperands());
  }

  /// Where a rank meets the others: a wait, a blocking collective.
  static bool synchronizes(Operation *op) {
    return isa<AllReduceWaitOp, ReduceScatterWaitOp, GatherParamsWaitOp,
               AllGatherWaitOp, AllReduceOp, AllReduceBucketOp>(op);
  }

  /// Each kernel's factor on its calibrated seconds (Machine::computeFactor)
  /// by the segment it falls in: a step (`sequence`: the functions it
  /// calls, in order, each so many times) cut at its synchronizations, its
  /// last segment running on into the next step's first. A kernel in
  /// several calls gets their mean.
  void segmentFactors(ArrayRef<std::pair<func::FuncOp, int64_t>> sequence) {
    SmallVector<SmallVector<std::pair<Operation *, double>>> segments(1);
    for (auto [f, calls] : sequence)
      for (int64_t c = 0; c < calls; ++c)
        for (Operation &op : f.front()) {
          if (synchronizes(&op))
            segments.emplace_back();
          else if (!isa<func::ReturnOp, AllReduceStartOp, ReduceScatterStartOp,
                        AllGatherStartOp, GatherParamsStartOp>(op))
            segments.back().push_back({&op, kernelSeconds(&op)});
        }
    const bool synchronized = segments.size() > 1;
    if (synchronized) { // the last runs into the next step's first
      segments.front().append(segments.back().begin(), segments.back().end());
      segments.pop_back();
    }
    DenseMap<Operation *, std::pair<double, int>> sum;
    for (auto &segment : segments) {
      double alone = 0;
      for (auto &[op, s] : segment)
        alone += s;
      // (No synchronization at all: steps back to back, one long segment.)
      const double f = machine.computeFactor(synchronized ? alone : HUGE_VAL);
      for (auto &[op, s] : segment) {
        sum[op].first += f;
        ++sum[op].second;
      }
    }
    for (auto &[op, fs] : sum)
      factors[op] = fs.first / double(fs.second);
  }

  struct Time {
    double total = 0, compute = 0, comm = 0;
    std::map<std::string, double> byKind; // kernels' seconds by op name
  };

  /// One call of `step`: the kernels in order on one stream; the
  /// collectives in order on a channel of their own from their starts (or,
  /// with deferred starts, each at its wait), which a wait blocks on. The
  /// channel's work is its collectives' calibrated (alone) seconds: it
  /// does that work at the calibrated rate while the rank waits, and each
  /// collective's Machine::besideFactor times slower while the rank's
  /// kernels run.
  Time run(func::FuncOp step) const {
    Time t;
    // The channel's work done and enqueued so far (done <= queued), each
    // request's mark (the work it is done at), and where each collective's
    // work ends with its factor beside kernels, in order.
    double done = 0, queued = 0;
    DenseMap<Value, double> marks;
    DenseMap<int64_t, double> carried; // a carried gather's bucket: same
    SmallVector<std::pair<double, double>> ends; // (its end, its factor)
    size_t head = 0;                             // the first not done
    const bool deferred = machine.deferredStarts;
    // (Deferred, a collective starts at its wait, right after the rank's
    // kernels: at the seconds of one so started.)
    auto start = [&](Machine::Collective kind, double bytes) {
      if (deferred) // paid at the wait
        return -machine.collectiveSeconds(kind, bytes, /*afterCompute=*/true);
      const double seconds = machine.collectiveSeconds(kind, bytes);
      queued += seconds;
      ends.push_back({queued, machine.besideFactor(seconds)});
      return queued;
    };
    // A kernel of `s` calibrated seconds, from now: at the sustained rate,
    // and while the channel has work at the rate beside collectives; the
    // channel's work goes on meanwhile, each collective at its factor.
    auto kernel = [&](double s, Operation *op) {
      auto it = factors.find(op);
      const double alone = it == factors.end() ? machine.compute : it->second,
                   slowed = alone * std::max(1.0, machine.computeCommunicating /
                                                      machine.compute);
      double seconds = 0;
      while (s > 0) {
        while (head < ends.size() && ends[head].first <= done)
          ++head;
        if (head == ends.size()) { // the channel is idle
          seconds += s * alone;
          break;
        }
        auto [end, factor] = ends[head];
        const double window = (end - done) * factor; // till it is done
        if (s * slowed <= window) {
          seconds += s * slowed;
          done += s * slowed / factor;
          break;
        }
        seconds += window;
        s -= window / slowed;
        done = end;
      }
      return seconds;
    };
    // Blocked until the channel's work reaches `mark` (or, deferred, for
    // the collective's seconds).
    auto wait = [&](double mark) {
      const double seconds = mark < 0 ? -mark : std::max(0.0, mark - done);
      if (mark >= 0)
        done = std::max(done, mark);
      t.total += seconds;
      t.comm += seconds;
    };
    using C = Machine::Collective;
    // The gathers the step leaves in flight meet it at its start (the
    // previous step's end).
    step.walk([&](AllGatherStartOp g) {
      if (g.getCarried())
        carried[int64_t(g.getBucket())] =
            start(C::AllGather, collectiveBytes(g));
    });
    for (Operation &op : step.front()) {
      if (isa<func::ReturnOp>(op))
        continue;
      if (auto g = dyn_cast<AllGatherStartOp>(op); g && g.getCarried())
        continue;
      if (isa<AllReduceStartOp, ReduceScatterStartOp, AllGatherStartOp,
              GatherParamsStartOp>(op)) {
        const C kind = isa<AllReduceStartOp>(op)       ? C::AllReduce
                       : isa<ReduceScatterStartOp>(op) ? C::ReduceScatter
                                                       : C::AllGather;
        marks[op.getResult(0)] = start(kind, collectiveBytes(&op));
        continue;
      }
      if (isa<AllReduceWaitOp, ReduceScatterWaitOp, GatherParamsWaitOp>(op)) {
        wait(marks.lookup(op.getOperand(0)));
        continue;
      }
      if (auto w = dyn_cast<AllGatherWaitOp>(op)) {
        wait(w.getRequest() ? marks.lookup(w.getRequest())
                            : carried.lookup(int64_t(w.getBucket())));
        continue;
      }
      if (isa<AllReduceOp, AllReduceBucketOp>(op)) { // blocking
        const double s = machine.collectiveSeconds(
            C::AllReduce, collectiveBytes(&op), /*afterCompute=*/true);
        wait(queued); // behind the channel's work
        t.total += s;
        t.comm += s;
        continue;
      }
      const double s = kernel(kernelSeconds(&op), &op);
      t.total += s;
      t.compute += s;
      if (s > 0)
        t.byKind[op.getName().stripDialect().str()] += s;
    }
    return t;
  }
};
} // namespace

Prediction dtc::predict(ModuleOp module, const Machine &machine,
                        int64_t ranks) {
  auto *dtc = module->getContext()->getLoadedDialect<DtcDialect>();
  PlanReport plan(module);
  Prediction p;
  ShardAttr shard = shardOf(module);
  p.ranks = ranks > 0                       ? ranks
            : shard && shard.getRanks() > 0 ? shard.getRanks()
                                            : machine.ranks;
  p.batch = plan.batch;
  Machine at = machine;
  if (p.ranks != machine.ranks && machine.source == "built-in defaults")
    at = Machine::defaults(p.ranks);
  at.ranks = p.ranks;
  at.machineRanks = std::min(at.machineRanks, at.ranks);
  StepModel model{at, plan.batch, optimizerStateBuffers(module)};
  auto train = module.lookupSymbol<func::FuncOp>(steps::kTrain);
  if (!train)
    return p;
  train.walk([&](ReduceScatterStartOp rs) {
    if (BucketPlanAttr b = dtc->getBucketPlanAttrHelper().getAttr(rs))
      model.bucketFloats[int64_t(rs.getBucket())] = b.getCount();
  });
  // A step's batch: its inputs' per-sample bytes, copied in once.
  double perSample = 0;
  for (Type t : train.getArgumentTypes())
    if (auto tensor = dyn_cast<RankedTensorType>(t);
        tensor && tensor.getRank() > 0 && tensor.isDynamicDim(0)) {
      double n = 4;
      for (int64_t d : tensor.getShape().drop_front())
        n *= double(d);
      perSample += n;
    }
  p.batchBytes = int64_t(perSample) * plan.batch;
  model.meets =
      double(plan.persistentBytes + plan.allocatedArena() + p.batchBytes) *
      double(at.machineRanks);
  int64_t k = 1;
  if (IntegerAttr acc = dtc->getAccumulateAttrHelper().getAttr(module))
    k = std::max<int64_t>(1, acc.getInt());
  auto micro = module.lookupSymbol<func::FuncOp>(steps::kAccumulate);
  if (!micro || k == 1)
    model.segmentFactors({{train, 1}});
  else
    model.segmentFactors({{micro, k - 1}, {train, 1}});
  StepModel::Time t = model.run(train);
  if (micro && k > 1) {
    StepModel::Time m = model.run(micro);
    for (auto &[kind, seconds] : m.byKind)
      t.byKind[kind] += double(k - 1) * seconds;
    t.total += double(k - 1) * m.total;
    t.compute += double(k - 1) * m.compute;
    t.comm += double(k - 1) * m.comm;
  }
  const double copyIn =
      double(k) * at.elementwiseSeconds(2.0 * double(p.batchBytes));
  p.stepSeconds = t.total + copyIn;
  p.computeSeconds = t.compute + copyIn;
  p.commSeconds = t.comm;
  p.kernelSeconds.assign(t.byKind.begin(), t.byKind.end());
  llvm::sort(p.kernelSeconds,
             [](auto &a, auto &b) { return a.second > b.second; });
  // Memory: what the rank allocates, its batch buffer, the collectives'
  // temporaries and the process's base.
  p.persistentBytes = plan.persistentBytes;
  p.arenaBytes = plan.allocatedArena();
  int64_t largest = 0;
  for (const PlanReport::Bucket &b : plan.buckets)
    largest = std::max(largest, b.bytes);
  // (Open MPI 4.1 here: an all-reduce keeps a bucket-sized temporary; a
  // sharded step's reduce-scatter and all-gather one each, stage 3's
  // prefetched gathers one more: benchmarks/plan_demo.sh.)
  const int64_t stage = shard ? int64_t(shard.getStage()) : 0;
  p.commBytes = p.ranks > 1 ? largest * (stage == 0  ? 1
                                         : stage < 3 ? 2
                                                     : 3)
                            : 0;
  p.processBytes = at.processBytes;
  p.peakBytes = p.persistentBytes + p.arenaBytes + p.batchBytes + p.commBytes +
                p.processBytes;
  return p;
}

std::string dtc::formatSeconds(double seconds) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (seconds >= 1)
    os << llvm::format("%.2f s", seconds);
  else
    os << llvm::format("%.1f ms", seconds * 1e3);
  return s;
}

std::string dtc::formatBytes(int64_t bytes) {
  std::string s;
  llvm::raw_string_ostream os(s);
  const double b = double(bytes);
  if (b >= 1024.0 * 1048576)
    os << llvm::format("%.2f GiB", b / (1024.0 * 1048576));
  else
    os << llvm::format("%.1f MiB", b / 1048576);
  return s;
}

//===--- dtc-predict ------------------------------------------------------===//

namespace {
struct PredictPass : public dtc::impl::PredictBase<PredictPass> {
  using PredictBase::PredictBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module.lookupSymbol<func::FuncOp>(steps::kTrain))
      return; // (nothing to predict: a module without training)
    Machine m;
    if (machine.empty()) {
      m = Machine::defaults(ranks > 0 ? int64_t(ranks) : 1);
    } else {
      std::string error;
      std::optional<Machine> loaded = Machine::load(machine, error);
      if (!loaded) {
        module.emitError() << "dtc-predict: " << error;
        return signalPassFailure();
      }
      m = std::move(*loaded);
    }
    Prediction p = dtc::predict(module, m, ranks);
    auto *dtc = module->getContext()->getLoadedDialect<DtcDialect>();
    dtc->getPredictionAttrHelper().setAttr(
        module,
        PredictionAttr::get(module.getContext(), p.stepSeconds,
                            p.computeSeconds, p.commSeconds, p.peakBytes,
                            p.ranks, p.batch, budget, m.sustainedGemm));
    markAllAnalysesPreserved();
  }
};
} // namespace
