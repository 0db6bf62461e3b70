//===- Recipe.cpp - The training recipe: data, optimizer, schedule --------===//
#include "frontends/dsl/Gen.h"

#include "mlir/IR/Verifier.h"
#include "llvm/Support/Path.h"
#include <climits>
#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace dtc;
using namespace dtc::dsl;

//===----------------------------------------------------------------------===//
// The training recipe
//===----------------------------------------------------------------------===//

OptimizerAttr Gen::genOptimizer(const Expr &e) {
  std::optional<OptimizerKind> kind = e.kind == Expr::Kind::Call
                                          ? symbolizeOptimizerKind(e.text)
                                          : std::nullopt;
  if (!kind) {
    error(e.loc) << "expected an optimizer: sgd(...), adam(...) or adamw(...)";
    return {};
  }
  bool isSgd = *kind == OptimizerKind::SGD;
  SmallVector<llvm::StringRef> keys =
      isSgd ? SmallVector<llvm::StringRef>{"lr", "momentum", "dampening",
                                           "weight_decay", "nesterov"}
            : SmallVector<llvm::StringRef>{"lr", "beta1", "beta2", "eps",
                                           "weight_decay"};
  if (!checkArgs(e, 1, keys))
    return {};
  // torch.optim's defaults (the dialect's), then what the call gives; the
  // attribute's verifier checks the values, at the call.
  OptimizerAttr d = defaultOptimizer(ctx, *kind);
  llvm::StringMap<double> v = {{"lr", d.getLr()},
                               {"momentum", d.getMomentum()},
                               {"dampening", d.getDampening()},
                               {"weight_decay", d.getWeightDecay()},
                               {"beta1", d.getBeta1()},
                               {"beta2", d.getBeta2()},
                               {"eps", d.getEps()}};
  bool nesterov = d.getNesterov();
  for (auto [i, key] : llvm::enumerate(keys)) {
    const Expr *a = arg(e, i == 0 ? 0 : 99, key, false);
    if (!a)
      continue;
    if (key == "nesterov") {
      auto bv = boolean(*a, "nesterov");
      if (!bv)
        return {};
      nesterov = *bv;
      continue;
    }
    auto x = number(*a, key);
    if (!x)
      return {};
    v[key] = *x;
  }
  auto at = [&] { return error(e.loc) << e.text << "(): "; };
  return OptimizerAttr::getChecked(
      llvm::function_ref<InFlightDiagnostic()>(at), ctx, *kind, F64(v["lr"]),
      F64(v["weight_decay"]), F64(v["momentum"]), F64(v["dampening"]), nesterov,
      F64(v["beta1"]), F64(v["beta2"]), F64(v["eps"]));
}

void Gen::genData(const Expr &e, Data &data) {
  if (e.kind != Expr::Kind::Call) {
    error(e.loc) << "expected a dataset: mnist(dir), fashion_mnist(dir), "
                    "idx(dir), csv(train, test), synthetic(train, test) or "
                    "text(path, block)";
    return;
  }
  if (e.text == "mnist" || e.text == "fashion_mnist" || e.text == "idx") {
    if (!checkArgs(e, 1, {"dir"}))
      return;
    std::string dir = "/usr/share/datasets/fashion-mnist";
    if (const Expr *d = arg(e, 0, "dir", e.text != "fashion_mnist")) {
      auto s = string(*d, "the dataset directory");
      if (!s)
        return;
      dir = *s;
    } else if (e.text != "fashion_mnist") {
      return;
    }
    data.kind = DataKind::IDX;
    data.dir = dir;
    return;
  }
  if (e.text == "csv") {
    if (!checkArgs(e, 2, {"train", "test"}))
      return;
    const Expr *tr = arg(e, 0, "train", true);
    auto trs = tr ? string(*tr, "the training file") : std::nullopt;
    if (!trs)
      return;
    data.kind = DataKind::CSV;
    data.train = *trs;
    if (const Expr *te = arg(e, 1, "test", false)) {
      auto tes = string(*te, "the test file");
      if (!tes)
        return;
      data.test = *tes;
    }
    return;
  }
  if (e.text == "synthetic") {
    if (!checkArgs(e, 2, {"train", "test"}))
      return;
    int64_t train = 1024, test = 256;
    if (const Expr *a = arg(e, 0, "train", false)) {
      auto n = integer(*a, "the training set size", 1);
      if (!n)
        return;
      train = *n;
    }
    if (const Expr *a = arg(e, 1, "test", false)) {
      auto n = integer(*a, "the test set size", 0);
      if (!n)
        return;
      test = *n;
    }
    data.kind = DataKind::Synthetic;
    data.trainSize = train;
    data.testSize = test;
    return;
  }
  if (e.text == "text") {
    // text(path, block=T): byte tokens in windows of the input's length.
    if (!checkArgs(e, 2, {"path", "block"}))
      return;
    const Expr *pe = arg(e, 0, "path", true);
    auto path = pe ? string(*pe, "the text file or directory") : std::nullopt;
    if (!path)
      return;
    auto it = inputType;
    if (!it || !it.getElementType().isInteger(32)) {
      error(e.loc) << "text() data feeds token ids: the model's input must be "
                      "i32[B, T], got "
                   << (it ? shape::str(it) : std::string("none"));
      return;
    }
    const int64_t window = it.getDimSize(1);
    if (const Expr *be = arg(e, 1, "block", false)) {
      auto n = integer(*be, "the block (the window of tokens)", 1);
      if (!n)
        return;
      if (*n != window) {
        error(be->loc) << "block " << *n
                       << " must be the input's length T = " << window << " ("
                       << shape::str(it) << ")";
        return;
      }
    }
    data.kind = DataKind::Text;
    data.train = *path;
    return;
  }
  error(e.loc)
      << "unknown dataset '" << e.text
      << "' (expected mnist, fashion_mnist, idx, csv, synthetic, text)";
}

/// schedule = cosine(warmup=100, decay_steps=0, min_lr=0), linear(...),
/// step(step_size=1, gamma=0.1, warmup=0) or constant(warmup=0): the train
/// options --lr-schedule, --warmup-steps, ... (runtime/lib/options/schedule.h).
ScheduleAttr Gen::genSchedule(const Expr &e) {
  std::optional<LrScheduleKind> kind = e.kind == Expr::Kind::Call
                                           ? symbolizeLrScheduleKind(e.text)
                                           : std::nullopt;
  if (!kind) {
    error(e.loc) << "expected a schedule: constant(...), cosine(...), "
                    "linear(...) or step(...)";
    return {};
  }
  const bool decays =
      *kind == LrScheduleKind::Cosine || *kind == LrScheduleKind::Linear;
  SmallVector<llvm::StringRef> keys{"warmup"};
  if (decays)
    keys.append({"decay_steps", "min_lr"});
  if (*kind == LrScheduleKind::Step)
    keys.append({"step_size", "gamma"});
  if (!checkArgs(e, 0, keys))
    return {};
  int64_t warmup = 0, decaySteps = 0, stepSize = 1;
  double minLr = 0, gamma = 0.1;
  for (const KeywordArg &k : e.kwargs) {
    std::optional<double> v = k.name == "min_lr" || k.name == "gamma"
                                  ? number(*k.value, k.name)
                                  : std::optional<double>();
    std::optional<int64_t> n =
        v ? std::nullopt
          : integer(*k.value, k.name, k.name == "step_size" ? 1 : 0);
    if (!v && !n)
      return {};
    if (k.name == "warmup")
      warmup = *n;
    else if (k.name == "decay_steps")
      decaySteps = *n;
    else if (k.name == "step_size")
      stepSize = *n;
    else if (k.name == "min_lr")
      minLr = *v;
    else
      gamma = *v;
  }
  auto at = [&] { return error(e.loc) << "schedule: "; };
  return ScheduleAttr::getChecked(llvm::function_ref<InFlightDiagnostic()>(at),
                                  ctx, *kind, warmup, decaySteps, F64(minLr),
                                  stepSize, F64(gamma));
}

void Gen::genRecipe(const Program &p) {
  Data data;
  int64_t batch = 64, epochs = 1, seed = 0;
  double validation = 0;
  OptimizerAttr opt;
  ScheduleAttr schedule;
  std::optional<double> clipNorm;
  int64_t accumulate = 1;
  std::optional<ShardStage> shard;
  int64_t ranks = 0;
  llvm::StringMap<Loc> seen;
  for (const Setting &s : p.train) {
    // Aliases name the same setting.
    llvm::StringRef canonical = s.key == "dataset" ? "data"
                                : s.key == "batch_size"
                                    ? "batch"
                                    : llvm::StringRef(s.key);
    if (!seen.insert({canonical, s.loc}).second) {
      error(s.loc) << "'" << canonical << "' is set twice in the train block";
      continue;
    }
    const Expr &v = *s.value;
    if (s.key == "data" || s.key == "dataset") {
      genData(v, data);
    } else if (s.key == "batch" || s.key == "batch_size") {
      if (auto n = integer(v, "the batch size", 1))
        batch = *n;
    } else if (s.key == "accumulate") {
      if (auto n = integer(v, "the micro-batches per optimizer step", 1))
        accumulate = *n;
    } else if (s.key == "epochs") {
      if (auto n = integer(v, "the number of epochs", 0))
        epochs = *n;
    } else if (s.key == "seed") {
      if (auto n = integer(v, "the seed", 0))
        seed = *n;
    } else if (s.key == "validation") {
      auto x = number(v, "the validation fraction");
      if (x && !(*x >= 0 && *x < 1))
        error(v.loc) << "validation is the fraction of the training set held "
                        "out, in [0, 1), got "
                     << *x;
      else if (x)
        validation = *x;
    } else if (s.key == "optimizer") {
      opt = genOptimizer(v);
    } else if (s.key == "schedule") {
      schedule = genSchedule(v);
    } else if (s.key == "clip_grad_norm") {
      auto x = number(v, "the gradients' maximum norm");
      if (x && !(*x > 0 && std::isfinite(*x)))
        error(v.loc) << "clip_grad_norm is the gradients' maximum 2-norm, > 0, "
                        "got "
                     << *x;
      else if (x)
        clipNorm = *x;
    } else if (s.key == "shard") {
      // A stage's name (dtc --shard's) or its number.
      if (v.kind == Expr::Kind::Number && v.isInteger && v.number >= 0 &&
          v.number <= 3)
        shard = ShardStage(int(v.number));
      else if (v.kind == Expr::Kind::Name || v.kind == Expr::Kind::String)
        shard = symbolizeShardStage(v.text);
      if (!shard)
        error(v.loc) << "shard is none, optimizer, gradients or parameters "
                        "(or the stage, 0 to 3)";
    } else if (s.key == "ranks") {
      if (auto n = integer(v, "the ranks the shards are planned for", 1))
        ranks = *n;
    } else if (s.key == "lr") {
      auto x = number(v, "the learning rate");
      if (x && *x <= 0)
        error(v.loc) << "the learning rate must be positive";
      else if (x)
        lrOverride = *x;
    } else {
      error(s.loc) << "unknown train setting '" << s.key
                   << "' (expected data, batch, epochs, optimizer, lr, "
                      "schedule, clip_grad_norm, accumulate, shard, ranks, "
                      "seed, validation)";
    }
  }
  if (hadError)
    return;
  // A text holds out its last tenth unless the recipe says otherwise
  // (nanoGPT's split).
  if (data.kind == DataKind::Text && !seen.count("validation"))
    validation = 0.1;
  if (!opt) {
    Expr sgd(Expr::Kind::Call, p.trainLoc);
    sgd.text = "sgd";
    opt = genOptimizer(sgd);
  }
  if (opt && lrOverride) // the recipe's `lr = ...`
    opt = OptimizerAttr::get(ctx, opt.getKind(), *lrOverride,
                             opt.getWeightDecay(), opt.getMomentum(),
                             opt.getDampening(), opt.getNesterov(),
                             opt.getBeta1(), opt.getBeta2(), opt.getEps());
  auto at = [&] { return error(p.trainLoc) << "train: "; };
  auto recipe = RecipeAttr::getChecked(
      llvm::function_ref<InFlightDiagnostic()>(at), ctx, data.kind,
      llvm::StringRef(data.dir), llvm::StringRef(data.train),
      llvm::StringRef(data.test), data.trainSize, data.testSize, batch, epochs,
      seed, F64(validation));
  if (!opt || !recipe)
    return;
  DtcDialect *dialect = ctx->getLoadedDialect<DtcDialect>();
  dialect->getRecipeAttrHelper().setAttr(module, recipe);
  dialect->getOptimizerAttrHelper().setAttr(module, opt);
  if (schedule)
    dialect->getScheduleAttrHelper().setAttr(module, schedule);
  if (accumulate > 1)
    dialect->getAccumulateAttrHelper().setAttr(module,
                                               b.getI64IntegerAttr(accumulate));
  if (clipNorm)
    dialect->getClipGradNormAttrHelper().setAttr(module,
                                                 b.getF64FloatAttr(*clipNorm));
  // (ranks 0: not given; dtc --ranks may give it.)
  if (shard || ranks)
    dialect->getShardAttrHelper().setAttr(
        module, ShardAttr::get(ctx, shard.value_or(ShardStage::None), ranks));
}
