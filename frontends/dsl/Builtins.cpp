//===- Builtins.cpp - The DSL's builtin functions
//--------------------------===//
//
// Each builtin (linear, conv2d, layer_norm, cross_entropy, ...) once: its
// entry in the registry (name, parameters with their defaults, what it
// computes) and its builder. The registry drives the dispatch of calls,
// the checking of their arguments and keywords (with the errors), and the
// builtin table of docs/dsl.md (dtc --list-builtins prints it).
//
//===----------------------------------------------------------------------===//
#include "frontends/dsl/Gen.h"

#include "mlir/IR/Verifier.h"
#include "llvm/Support/Path.h"
#include <climits>
#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace dtc;
using namespace dtc::dsl;

Value Gen::genLinear(const Expr &e, llvm::StringRef assignedName) {
  if (assignedName.empty()) {
    error(e.loc) << e.text << "() must be assigned to a name (the name of its "
                 << "parameters), as in 'fc1 = " << e.text << "(x, 128)'";
    return {};
  }
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true), *ue = arg(e, "units", true);
  if (!xe || !ue)
    return {};
  Value x = requireF32(*xe, "the input of " + e.text + "()");
  auto units = integer(*ue, "units", 1);
  if (!x || !units)
    return {};
  auto xt = cast<RankedTensorType>(x.getType());
  if (xt.getRank() < 2) {
    error(xe->loc) << e.text << "() needs an input of at least 2 dimensions "
                   << "[..., features], got " << shape::str(xt);
    return {};
  }
  int64_t in = xt.getShape().back();
  if (ShapedType::isDynamic(in)) {
    error(xe->loc) << e.text << "() input features cannot be the batch";
    return {};
  }
  bool hasBias = true;
  if (const Expr *be = arg(e, "bias", false)) {
    auto v = boolean(*be, "bias");
    if (!v)
      return {};
    hasBias = *v;
  }
  if (failed(shape::size(loc(e.loc), {*units, in}))) {
    hadError = true;
    return {};
  }
  double bound = 1.0 / std::sqrt((double)in);
  auto f32 = b.getF32Type();
  Value w = declareParam((assignedName + ".weight").str(), e.loc,
                         RankedTensorType::get({*units, in}, f32),
                         InitKind::Uniform, -bound, bound);
  if (!w)
    return {};
  Location at = loc(e.loc);
  auto t = shape::matmul(at, x.getType(), w.getType(), false, true);
  Value y = MatmulOp::create(b, at, *t, x, w, false, true);
  if (hasBias) {
    Value bias = declareParam((assignedName + ".bias").str(), e.loc,
                              RankedTensorType::get({*units}, f32),
                              InitKind::Uniform, -bound, bound);
    if (!bias)
      return {};
    y = AddOp::create(b, at, y.getType(), y, bias);
  }
  return activation(e, y);
}

/// The `act=` of linear() and conv2d() applied to y (relu, tanh, sigmoid,
/// gelu, none); null after an error.
Value Gen::activation(const Expr &call, Value y) {
  const Expr *a = arg(call, "act", false);
  if (!a)
    return y;
  if (a->kind != Expr::Kind::Name) {
    error(a->loc) << "expected an activation name (relu, tanh, sigmoid, "
                     "gelu, gelu_tanh, none)";
    return {};
  }
  Location at = loc(call.loc);
  const std::string &act = a->text;
  if (act == "relu")
    return ReluOp::create(b, at, y.getType(), y);
  if (act == "tanh")
    return TanhOp::create(b, at, y.getType(), y);
  if (act == "sigmoid")
    return SigmoidOp::create(b, at, y.getType(), y);
  if (act == "gelu")
    return GeluOp::create(b, at, y.getType(), y);
  if (act == "gelu_tanh")
    return GeluTanhOp::create(b, at, y.getType(), y);
  if (act == "none")
    return y;
  error(a->loc) << "unknown activation '" << act
                << "' (expected relu, tanh, sigmoid, gelu, gelu_tanh, none)";
  return {};
}

std::optional<std::array<int64_t, 2>>
Gen::pairOf(const Expr &e, llvm::StringRef what, int64_t min) {
  if (e.kind == Expr::Kind::List) {
    if (e.args.size() != 2) {
      error(e.loc) << "expected an integer or a pair [h, w] for " << what
                   << ", got " << e.args.size() << " values";
      return std::nullopt;
    }
    auto h = integer(*e.args[0], what, min);
    if (!h)
      return std::nullopt;
    auto w = integer(*e.args[1], what, min);
    if (!w)
      return std::nullopt;
    return std::array<int64_t, 2>{*h, *w};
  }
  auto n = integer(e, what, min);
  if (!n)
    return std::nullopt;
  return std::array<int64_t, 2>{*n, *n};
}

/// conv2d(x, out_channels, kernel, stride=1, padding=0, dilation=1,
/// groups=1, bias=true, act=none): torch.nn.Conv2d on NCHW input, with
/// parameters `<name>.weight` [out, in / groups, kH, kW] and `<name>.bias`
/// [out], initialized as PyTorch does (U(+-1/sqrt(fan_in)), fan_in = in /
/// groups * kH * kW).
Value Gen::genConv2d(const Expr &e, llvm::StringRef assignedName) {
  if (assignedName.empty()) {
    error(e.loc) << "conv2d() must be assigned to a name (the name of its "
                    "parameters), as in 'c1 = conv2d(x, 32, 3)'";
    return {};
  }
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true), *oe = arg(e, "out_channels", true),
             *ke = arg(e, "kernel", true);
  if (!xe || !oe || !ke)
    return {};
  Value x = requireF32(*xe, "the input of conv2d()");
  if (!x)
    return {};
  auto out = integer(*oe, "out_channels", 1);
  auto kernel = out ? pairOf(*ke, "the kernel size", 1) : std::nullopt;
  if (!kernel)
    return {};
  shape::Window w{};
  w.kernel = *kernel;
  w.stride = {1, 1};
  w.padding = {0, 0};
  w.dilation = {1, 1};
  struct PairArg {
    const char *name, *what;
    int64_t min;
    std::array<int64_t, 2> *into;
  };
  for (const PairArg &p : {PairArg{"stride", "the stride", 1, &w.stride},
                           PairArg{"padding", "the padding", 0, &w.padding},
                           PairArg{"dilation", "the dilation", 1, &w.dilation}})
    if (const Expr *pe = arg(e, p.name, false)) {
      auto v = pairOf(*pe, p.what, p.min);
      if (!v)
        return {};
      *p.into = *v;
    }
  int64_t groups = 1;
  if (const Expr *ge = arg(e, "groups", false)) {
    auto g = integer(*ge, "groups", 1);
    if (!g)
      return {};
    groups = *g;
  }
  bool hasBias = true;
  if (const Expr *be = arg(e, "bias", false)) {
    auto v = boolean(*be, "bias");
    if (!v)
      return {};
    hasBias = *v;
  }
  auto xt = cast<RankedTensorType>(x.getType());
  if (xt.getRank() != 4) {
    error(xe->loc) << "conv2d() needs an input [batch, channels, height, "
                      "width], got "
                   << shape::str(xt);
    return {};
  }
  const int64_t in = xt.getDimSize(1);
  if (in % groups || *out % groups) {
    error(e.loc) << "conv2d(): " << in << " input channels and " << *out
                 << " output channels must both be divisible by groups ("
                 << groups << ")";
    return {};
  }
  auto f32 = b.getF32Type();
  auto wt =
      RankedTensorType::get({*out, in / groups, w.kernel[0], w.kernel[1]}, f32);
  Location at = loc(e.loc);
  // The shape first, so that nothing is declared for a convolution that
  // does not fit its input.
  auto yt = shape::conv2d(at, x.getType(), wt, w, groups);
  if (failed(yt))
    return hadError = true, Value();
  double bound =
      1.0 / std::sqrt(double(in / groups * w.kernel[0] * w.kernel[1]));
  Value weight = declareParam((assignedName + ".weight").str(), e.loc, wt,
                              InitKind::Uniform, -bound, bound);
  if (!weight)
    return {};
  Value bias;
  if (hasBias) {
    bias = declareParam((assignedName + ".bias").str(), e.loc,
                        RankedTensorType::get({*out}, f32), InitKind::Uniform,
                        -bound, bound);
    if (!bias)
      return {};
  }
  // The bias is the convolution's operand: its kernel adds it (no pass of
  // its own), and its gradient comes with the weight's.
  Value y = Conv2dOp::create(
      b, at, *yt, x, weight, bias, b.getDenseI64ArrayAttr(w.stride),
      b.getDenseI64ArrayAttr(w.padding), b.getDenseI64ArrayAttr(w.dilation),
      b.getI64IntegerAttr(groups));
  return activation(e, y);
}

/// max_pool2d(x, kernel, stride=kernel, padding=0) and avg_pool2d(x, kernel,
/// stride=kernel, padding=0, count_include_pad=true), as torch.nn.functional.
Value Gen::genPool2d(const Expr &e) {
  const bool isMax = e.text == "max_pool2d";
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true), *ke = arg(e, "kernel", true);
  if (!xe || !ke)
    return {};
  Value x = requireF32(*xe, "the input of " + e.text + "()");
  if (!x)
    return {};
  auto kernel = pairOf(*ke, "the kernel size", 1);
  if (!kernel)
    return {};
  shape::Window w{};
  w.kernel = *kernel;
  w.stride = *kernel;
  w.padding = {0, 0};
  w.dilation = {1, 1};
  if (const Expr *se = arg(e, "stride", false)) {
    auto v = pairOf(*se, "the stride", 1);
    if (!v)
      return {};
    w.stride = *v;
  }
  if (const Expr *pe = arg(e, "padding", false)) {
    auto v = pairOf(*pe, "the padding", 0);
    if (!v)
      return {};
    w.padding = *v;
  }
  bool includePad = true;
  if (!isMax)
    if (const Expr *ce = arg(e, "count_include_pad", false)) {
      auto v = boolean(*ce, "count_include_pad");
      if (!v)
        return {};
      includePad = *v;
    }
  Location at = loc(e.loc);
  auto yt = shape::pool2d(at, e.text, x.getType(), w);
  if (failed(yt))
    return hadError = true, Value();
  auto kernelAttr = b.getDenseI64ArrayAttr(w.kernel);
  auto strideAttr = b.getDenseI64ArrayAttr(w.stride);
  auto paddingAttr = b.getDenseI64ArrayAttr(w.padding);
  if (isMax)
    return MaxPool2dOp::create(b, at, *yt, x, kernelAttr, strideAttr,
                               paddingAttr);
  return AvgPool2dOp::create(b, at, *yt, x, kernelAttr, strideAttr, paddingAttr,
                             b.getBoolAttr(includePad));
}

/// adaptive_avg_pool2d(x, 1): the mean of each channel's plane, [N, C, 1, 1]
/// (global average pooling; other output sizes are not supported yet).
Value Gen::genAdaptiveAvgPool2d(const Expr &e) {
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true), *oe = arg(e, "output_size", true);
  if (!xe || !oe)
    return {};
  Value x = requireF32(*xe, "the input of adaptive_avg_pool2d()");
  if (!x)
    return {};
  auto size = pairOf(*oe, "the output size", 1);
  if (!size)
    return {};
  if ((*size)[0] != 1 || (*size)[1] != 1) {
    error(oe->loc) << "adaptive_avg_pool2d() supports the output size 1 "
                      "(global average pooling) only";
    return {};
  }
  auto xt = cast<RankedTensorType>(x.getType());
  if (xt.getRank() != 4) {
    error(xe->loc) << "adaptive_avg_pool2d() needs an input [batch, "
                      "channels, height, width], got "
                   << shape::str(xt);
    return {};
  }
  Location at = loc(e.loc);
  auto s = xt.getShape();
  auto f32 = b.getF32Type();
  Value planes = ReshapeOp::create(
      b, at, RankedTensorType::get({s[0], s[1], s[2] * s[3]}, f32), x);
  Value mean = ReduceMeanOp::create(
      b, at, RankedTensorType::get({s[0], s[1]}, f32), planes, 2);
  return ReshapeOp::create(
      b, at, RankedTensorType::get({s[0], s[1], 1, 1}, f32), mean);
}

/// flatten(x): every dimension after the first in one, as nn.Flatten.
Value Gen::genFlatten(const Expr &e) {
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true);
  Value x = xe ? requireF32(*xe, "the input of flatten()") : Value();
  if (!x)
    return {};
  auto xt = cast<RankedTensorType>(x.getType());
  if (xt.getRank() < 2) {
    error(xe->loc) << "flatten() needs at least 2 dimensions, got "
                   << shape::str(xt);
    return {};
  }
  if (xt.getRank() == 2)
    return x;
  int64_t rest = 1;
  for (int64_t d : xt.getShape().drop_front())
    rest *= d;
  return ReshapeOp::create(
      b, loc(e.loc),
      RankedTensorType::get({xt.getDimSize(0), rest}, b.getF32Type()), x);
}

/// A number as a user wrote it (1.5, 1e-05), not as a diagnostic prints a
/// double (1.500000e+00).
static std::string shortNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

/// batch_norm(x, momentum=0.1, eps=1e-5, act=none): torch.nn.BatchNorm1d
/// on [N, C] or [N, C, L], BatchNorm2d on [N, C, H, W]. Declares the
/// parameters `name.weight` (ones) and `name.bias` (zeros) and the buffers
/// `name.running_mean` (zeros), `name.running_var` (ones) and
/// `name.num_batches_tracked` (int64), as the torch module has them.
/// A normalization's `eps` (argument `pos` or the keyword), > 0; `dflt`
/// when absent.
std::optional<double> Gen::epsOf(const Expr &call) {
  const Expr *ee = arg(call, "eps", false);
  if (!ee)
    return defaultOf(call, "eps");
  auto v = number(*ee, "the eps of " + call.text + "()");
  if (!v)
    return std::nullopt;
  if (!(*v > 0)) {
    error(ee->loc) << call.text << "() eps must be > 0, got "
                   << shortNumber(*v);
    return std::nullopt;
  }
  return v;
}

/// layer_norm(x, eps=1e-5): torch.nn.LayerNorm(x.shape[-1]) over the last
/// dimension, with parameters `<name>.weight` (ones) and `<name>.bias`
/// (zeros), [D] each; the same in training and evaluation.
/// The input of a normalization over the last dimension (layer_norm,
/// rms_norm), checked, and its eps; null after an error.
std::optional<std::pair<Value, double>>
Gen::rowNormInput(const Expr &e, llvm::StringRef assignedName,
                  llvm::StringRef what, llvm::StringRef example) {
  if (assignedName.empty()) {
    error(e.loc) << e.text << "() must be assigned to a name (the name of its "
                 << what << "), as in '" << example << "'";
    return std::nullopt;
  }
  if (!checkCall(e))
    return std::nullopt;
  const Expr *xe = arg(e, "x", true);
  Value x = xe ? requireF32(*xe, "the input of " + e.text + "()") : Value();
  if (!x)
    return std::nullopt;
  auto xt = cast<RankedTensorType>(x.getType());
  if (xt.getRank() < 2 || ShapedType::isDynamic(xt.getShape().back())) {
    error(xe->loc) << e.text
                   << "() normalizes the last dimension of an input "
                      "[B, ..., D], got "
                   << shape::str(xt);
    return std::nullopt;
  }
  auto eps = epsOf(e);
  if (!eps)
    return std::nullopt;
  return std::make_pair(x, *eps);
}

Value Gen::genLayerNorm(const Expr &e, llvm::StringRef assignedName) {
  auto in = rowNormInput(e, assignedName, "parameters", "ln1 = layer_norm(x)");
  if (!in)
    return {};
  auto [x, eps] = *in;
  auto xt = cast<RankedTensorType>(x.getType());
  auto f32 = b.getF32Type();
  auto pt = RankedTensorType::get({xt.getShape().back()}, f32);
  std::string n = assignedName.str();
  Value w = declareParam(n + ".weight", e.loc, pt, InitKind::Constant, 1, 0);
  Value bias =
      w ? declareParam(n + ".bias", e.loc, pt, InitKind::Zeros, 0, 0) : Value();
  if (!bias)
    return {};
  auto st = RankedTensorType::get(xt.getShape().drop_back(), f32);
  auto ln = LayerNormOp::create(b, loc(e.loc), xt, st, st, x, w, bias,
                                b.getF64FloatAttr(eps));
  return ln.getResult();
}

/// embedding(ids, num_embeddings, embedding_dim, init=normal(0, 1)):
/// torch.nn.Embedding, the rows of `<name>.weight` [num, dim] at the i32
/// ids (any shape), N(0, 1) as PyTorch initializes it.
/// name = rms_norm(x, eps=1e-6): torch.nn.RMSNorm(D, eps) over the last
/// dimension, its parameter name.weight (ones) [D], as LLaMA's RMSNorm.
Value Gen::genRmsNorm(const Expr &e, llvm::StringRef assignedName) {
  auto in = rowNormInput(e, assignedName, "parameter", "norm = rms_norm(x)");
  if (!in)
    return {};
  auto [x, eps] = *in;
  auto xt = cast<RankedTensorType>(x.getType());
  auto f32 = b.getF32Type();
  auto pt = RankedTensorType::get({xt.getShape().back()}, f32);
  Value w = declareParam(assignedName.str() + ".weight", e.loc, pt,
                         InitKind::Constant, 1, 0);
  if (!w)
    return {};
  auto st = RankedTensorType::get(xt.getShape().drop_back(), f32);
  auto rms =
      RmsNormOp::create(b, loc(e.loc), xt, st, x, w, b.getF64FloatAttr(eps));
  return rms.getResult();
}

Value Gen::genEmbedding(const Expr &e, llvm::StringRef assignedName) {
  if (assignedName.empty()) {
    error(e.loc) << "embedding() must be assigned to a name (the name of its "
                    "table), as in 'wte = embedding(ids, 256, 128)'";
    return {};
  }
  if (!checkCall(e))
    return {};
  const Expr *ie = arg(e, "ids", true), *ne = arg(e, "num_embeddings", true),
             *de = arg(e, "embedding_dim", true);
  if (!ie || !ne || !de)
    return {};
  Value ids = gen(*ie);
  if (!ids)
    return {};
  if (!cast<RankedTensorType>(ids.getType()).getElementType().isInteger(32)) {
    error(ie->loc) << "embedding() looks up i32 ids, got an f32 tensor "
                   << shape::str(ids.getType());
    return {};
  }
  auto num = integer(*ne, "num_embeddings", 1);
  auto dim = num ? integer(*de, "embedding_dim", 1) : std::nullopt;
  if (!dim)
    return {};
  Init init{InitKind::Normal, 0, 1};
  if (const Expr *ie2 = arg(e, "init", false)) {
    auto i = initOf(*ie2);
    if (!i)
      return {};
    init = *i;
  }
  if (failed(shape::size(loc(e.loc), {*num, *dim}))) {
    hadError = true;
    return {};
  }
  Value w = declareParam((assignedName + ".weight").str(), e.loc,
                         RankedTensorType::get({*num, *dim}, b.getF32Type()),
                         init.kind, init.a, init.b);
  if (!w)
    return {};
  Location at = loc(e.loc);
  auto t = shape::embedding(at, ids.getType(), w.getType());
  if (failed(t))
    return hadError = true, Value();
  return EmbeddingOp::create(b, at, *t, ids, w);
}

/// scaled_dot_product_attention(query, key, value, is_causal=false,
/// scale=1/sqrt(D)): F.scaled_dot_product_attention on [..., T, D] (as
/// [B, H, T, D]): one fused op, without attn_mask or dropout_p.
Value Gen::genAttention(const Expr &e) {
  for (const KeywordArg &k : e.kwargs)
    if (k.name == "attn_mask" || k.name == "dropout_p") {
      error(k.value->loc) << "scaled_dot_product_attention() takes no "
                          << k.name << " (is_causal=true is the mask dtc has)";
      return {};
    }
  if (!checkCall(e))
    return {};
  const Expr *qe = arg(e, "query", true), *ke = arg(e, "key", true),
             *ve = arg(e, "value", true);
  if (!qe || !ke || !ve)
    return {};
  Value q = requireF32(*qe, "the query");
  Value k = q ? requireF32(*ke, "the key") : Value();
  Value v = k ? requireF32(*ve, "the value") : Value();
  if (!v)
    return {};
  bool causal = false;
  for (const char *name : {"is_causal", "causal"})
    if (const Expr *ce = arg(e, name, false)) {
      auto c = boolean(*ce, name);
      if (!c)
        return {};
      causal = *c;
    }
  auto qt = cast<RankedTensorType>(q.getType());
  auto t = shape::attention(loc(e.loc), q.getType(), k.getType(), v.getType(),
                            causal);
  if (failed(t))
    return hadError = true, Value();
  double scale = 1.0 / std::sqrt(double(qt.getShape().back()));
  if (const Expr *se = arg(e, "scale", false)) {
    auto s = number(*se, "the scale");
    if (!s)
      return {};
    if (!(*s > 0)) {
      error(se->loc) << "the scale must be > 0, got " << *s;
      return {};
    }
    scale = *s;
  }
  auto op = AttentionOp::create(b, loc(e.loc), t->first, t->second, q, k, v,
                                causal, llvm::APFloat(scale));
  return op.getResult();
}

Value Gen::genBatchNorm(const Expr &e, llvm::StringRef assignedName) {
  if (assignedName.empty()) {
    error(e.loc) << "batch_norm() must be assigned to a name (the name of its "
                    "parameters and buffers), as in 'n1 = batch_norm(c1)'";
    return {};
  }
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true);
  Value x = xe ? requireF32(*xe, "the input of batch_norm()") : Value();
  if (!x)
    return {};
  double momentum = defaultOf(e, "momentum"), eps = 0;
  if (const Expr *me = arg(e, "momentum", false)) {
    auto v = number(*me, "the momentum of batch_norm()");
    if (!v)
      return {};
    if (!(*v >= 0 && *v <= 1)) {
      error(me->loc) << "batch_norm() momentum must be in [0, 1], got "
                     << shortNumber(*v);
      return {};
    }
    momentum = *v;
  }
  if (auto v = epsOf(e))
    eps = *v;
  else
    return {};
  Location at = loc(e.loc);
  auto ct = shape::batchNorm(loc(xe->loc), x.getType());
  if (failed(ct))
    return hadError = true, Value();
  std::string n = assignedName.str();
  Value w = declareParam(n + ".weight", e.loc, *ct, InitKind::Constant, 1, 0);
  Value bias = w ? declareParam(n + ".bias", e.loc, *ct, InitKind::Zeros, 0, 0)
                 : Value();
  Value rm = bias ? declareBuffer(n + ".running_mean", e.loc, *ct, 0) : Value();
  Value rv = rm ? declareBuffer(n + ".running_var", e.loc, *ct, 1) : Value();
  if (!rv)
    return {};
  auto counter = RankedTensorType::get({}, b.getI64Type());
  declareBuffer(n + ".num_batches_tracked", e.loc, counter, 0);
  if (hadError)
    return {};
  // act=relu is the kernel's (no pass of its own); other activations follow.
  const Expr *act = arg(e, "act", false);
  const bool relu = act && act->kind == Expr::Kind::Name && act->text == "relu";
  auto bn = BatchNormOp::create(b, at, x.getType(), *ct, *ct, x, w, bias, rm,
                                rv, b.getF64FloatAttr(eps),
                                relu ? b.getUnitAttr() : UnitAttr());
  auto sym = [&](const char *suffix) {
    return FlatSymbolRefAttr::get(ctx, n + suffix);
  };
  UpdateRunningStatsOp::create(b, at, x, bn.getMean(), bn.getVar(),
                               sym(".running_mean"), sym(".running_var"),
                               sym(".num_batches_tracked"),
                               b.getF64FloatAttr(momentum));
  return relu ? bn.getResult() : activation(e, bn.getResult());
}

/// dropout(x, p=0.5): inverted dropout in training, the identity in
/// evaluation (torch.nn.functional.dropout).
Value Gen::genDropout(const Expr &e) {
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true);
  Value x = xe ? requireF32(*xe, "the input of dropout()") : Value();
  if (!x)
    return {};
  double p = defaultOf(e, "p");
  if (const Expr *pe = arg(e, "p", false)) {
    auto v = number(*pe, "the dropout probability p");
    if (!v)
      return {};
    if (!(*v >= 0 && *v <= 1)) {
      error(pe->loc) << "dropout probability has to be between 0 and 1, but "
                        "got "
                     << shortNumber(*v);
      return {};
    }
    p = *v;
  }
  return DropoutOp::create(b, loc(e.loc), x.getType(), x, b.getF64FloatAttr(p),
                           b.getI64IntegerAttr(dropouts++));
}

/// sum/mean/max(x, axis=k, keepdims=false); no axis: over all axes.
Value Gen::genReduce(const Expr &e, llvm::StringRef kind) {
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true);
  if (!xe)
    return {};
  Value x = requireF32(*xe, "the input of " + e.text + "()");
  if (!x)
    return {};
  auto xt = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> axes;
  if (arg(e, "axis", false)) {
    auto ax = axisOf(e, xt.getRank());
    if (!ax)
      return {};
    axes.push_back(*ax);
  } else {
    for (int64_t i = xt.getRank() - 1; i >= 0; --i)
      axes.push_back(i);
  }
  bool keepdims = false;
  if (const Expr *k = arg(e, "keepdims", false)) {
    auto v = boolean(*k, "keepdims");
    if (!v)
      return {};
    keepdims = *v;
  }
  Location at = loc(e.loc);
  SmallVector<int64_t> kept(xt.getShape());
  for (int64_t ax : axes) { // descending, so earlier axes keep their index
    auto t = shape::reduce(at, x.getType(), ax);
    if (kind == "sum")
      x = ReduceSumOp::create(b, at, *t, x, ax);
    else if (kind == "mean")
      x = ReduceMeanOp::create(b, at, *t, x, ax);
    else
      x = ReduceMaxOp::create(b, at, *t, x, ax);
    kept[ax] = 1;
  }
  if (keepdims) {
    // A kept batch axis of size 1 is no longer the batch.
    auto t = RankedTensorType::get(kept, b.getF32Type());
    if (!shape::isBatched(cast<RankedTensorType>(x.getType())) &&
        shape::isBatched(t))
      t = RankedTensorType::get(kept, b.getF32Type());
    x = ReshapeOp::create(b, at, t, x);
  }
  return x;
}

/// q, k, v = split(x, 3, axis=-1): x cut into `chunks` equal consecutive
/// pieces along the axis (torch.chunk; the default axis is the last, since
/// dimension 0 is the batch); one name per piece. Empty after an error.
SmallVector<Value> Gen::genSplit(const Expr &e, size_t names) {
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true), *ce = arg(e, "chunks", true);
  Value x = xe ? requireF32(*xe, "the input of split()") : Value();
  auto chunks =
      x && ce ? integer(*ce, "the number of pieces", 1) : std::nullopt;
  if (!chunks)
    return {};
  auto xt = cast<RankedTensorType>(x.getType());
  auto ax = axisOf(e, xt.getRank());
  if (!ax)
    return {};
  if (size_t(*chunks) != names) {
    error(ce->loc) << "split() into " << *chunks << " pieces gives " << *chunks
                   << " values, but " << names << " names are assigned";
    return {};
  }
  const int64_t n = xt.getDimSize(*ax);
  if (ShapedType::isDynamic(n)) {
    error(e.loc) << "split() cannot cut the batch dimension B";
    return {};
  }
  if (n % *chunks != 0) {
    error(ce->loc) << "split() cannot cut dimension " << *ax << " of "
                   << shape::str(xt) << " (" << n << ") into " << *chunks
                   << " equal pieces";
    return {};
  }
  SmallVector<int64_t> piece(xt.getShape());
  piece[*ax] = n / *chunks;
  SmallVector<Type> types(size_t(*chunks),
                          RankedTensorType::get(piece, b.getF32Type()));
  auto op = SplitOp::create(b, loc(e.loc), types, x, *ax);
  return SmallVector<Value>(op.getResults().begin(), op.getResults().end());
}

/// concat([a, b, ...], axis=-1): torch.cat along an axis (the last by
/// default, since dimension 0 is the batch).
Value Gen::genConcat(const Expr &e) {
  if (!checkCall(e))
    return {};
  const Expr *le = arg(e, "tensors", true);
  if (!le)
    return {};
  if (le->kind != Expr::Kind::List || le->args.empty()) {
    error(le->loc) << "expected a list of tensors such as [a, b]";
    return {};
  }
  SmallVector<Value> inputs;
  for (const ExprPtr &t : le->args) {
    Value v = requireF32(*t, "a tensor of concat()");
    if (!v)
      return {};
    inputs.push_back(v);
  }
  auto ax = axisOf(e, cast<RankedTensorType>(inputs[0].getType()).getRank());
  if (!ax)
    return {};
  Location at = loc(e.loc);
  auto t = shape::concat(at, ValueRange(inputs).getTypes(), *ax);
  if (failed(t))
    return hadError = true, Value();
  return ConcatOp::create(b, at, *t, inputs, *ax);
}

/// transpose(x, dim0, dim1) (torch.transpose: two dimensions swapped),
/// transpose(x) (every dimension reversed; a matrix's transpose),
/// transpose(x, [perm]) and permute(x, [dims]) (torch.permute); the batch
/// dimension B stays first.
Value Gen::genTranspose(const Expr &e) {
  const std::string &f = e.text;
  const bool isPermute = f == "permute";
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true);
  Value x = xe ? requireF32(*xe, "the input of " + f + "()") : Value();
  if (!x)
    return {};
  Location at = loc(e.loc);
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<int64_t> perm;
  const Expr *first = arg(e, isPermute ? "dims" : "dim0", isPermute);
  if (isPermute && !first)
    return {};
  if (first && first->kind == Expr::Kind::List) {
    if (!isPermute && arg(e, "dim1", false)) {
      error(first->loc) << "transpose() takes two dimensions or one "
                           "permutation, not both";
      return {};
    }
    for (const ExprPtr &d : first->args) {
      auto n = dimOf(*d, rank);
      if (!n)
        return {};
      perm.push_back(*n);
    }
  } else if (isPermute) {
    error(first->loc) << "expected a permutation such as [0, 2, 1, 3]";
    return {};
  } else if (first) {
    const Expr *second = arg(e, "dim1", true);
    if (!second)
      return {};
    auto d0 = dimOf(*first, rank), d1 = d0 ? dimOf(*second, rank) : d0;
    if (!d1)
      return {};
    for (int64_t i = 0; i < rank; ++i)
      perm.push_back(i);
    std::swap(perm[*d0], perm[*d1]);
  } else {
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  }
  auto t = shape::transpose(at, x.getType(), perm);
  if (failed(t))
    return hadError = true, Value();
  if (shape::isBatched(*t) && !ShapedType::isDynamic(t->getDimSize(0))) {
    error(e.loc) << f
                 << " cannot move the batch dimension away from the "
                    "first position";
    return {};
  }
  return TransposeOp::create(b, at, *t, x, perm);
}

//===----------------------------------------------------------------------===//
// The builtins that are an op or two
//===----------------------------------------------------------------------===//

/// relu(x), tanh(x), ...: one elementwise op on an f32 tensor.
template <typename Op> Value Gen::genUnary(const Expr &e) {
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true);
  Value x = xe ? requireF32(*xe, "the input of " + e.text + "()") : Value();
  return x ? Value(Op::create(b, loc(e.loc), x.getType(), x)) : Value();
}

/// gelu(x, approximate="none" | "tanh"), as F.gelu.
Value Gen::genGelu(const Expr &e) {
  const std::string &f = e.text;
  (void)f;
  Location at = loc(e.loc);
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true);
  Value x = xe ? requireF32(*xe, "the input of gelu()") : Value();
  if (!x)
    return {};
  std::string approximate = "none";
  if (const Expr *ae = arg(e, "approximate", false)) {
    auto v = string(*ae, "gelu's approximate (\"none\" or \"tanh\")");
    if (!v)
      return {};
    if (*v != "none" && *v != "tanh") {
      error(ae->loc) << "gelu's approximate is \"none\" or \"tanh\", got \""
                     << *v << "\"";
      return {};
    }
    approximate = *v;
  }
  if (approximate == "tanh")
    return GeluTanhOp::create(b, at, x.getType(), x);
  return GeluOp::create(b, at, x.getType(), x);
}

/// add(a, b), ..., matmul(a, b): the operators as functions.
Value Gen::genBinaryCall(const Expr &e, char op) {
  const std::string &f = e.text;
  if (!checkCall(e))
    return {};
  const Expr *ae = arg(e, "a", true), *be = arg(e, "b", true);
  if (!ae || !be)
    return {};
  Value l = requireF32(*ae, "the first argument of " + f + "()");
  Value r = l ? requireF32(*be, "the second argument of " + f + "()") : Value();
  return r ? genBinary(op, e.loc, l, r) : Value();
}

Value Gen::genSoftmax(const Expr &e) {
  const std::string &f = e.text;
  (void)f;
  Location at = loc(e.loc);
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true);
  Value x = xe ? requireF32(*xe, "the input of " + f + "()") : Value();
  if (!x)
    return {};
  auto ax = axisOf(e, cast<RankedTensorType>(x.getType()).getRank());
  if (!ax)
    return {};
  if (f == "softmax")
    return SoftmaxOp::create(b, at, x.getType(), x, *ax);
  return LogSoftmaxOp::create(b, at, x.getType(), x, *ax);
}

Value Gen::genReshape(const Expr &e) {
  const std::string &f = e.text;
  (void)f;
  Location at = loc(e.loc);
  if (!checkCall(e))
    return {};
  const Expr *xe = arg(e, "x", true), *se = arg(e, "shape", true);
  if (!xe || !se)
    return {};
  Value x = requireF32(*xe, "the input of reshape()");
  if (!x)
    return {};
  if (se->kind != Expr::Kind::List) {
    error(se->loc) << "expected a shape such as [" << batchSymbol << ", 784]";
    return {};
  }
  SmallVector<int64_t> shape;
  for (const ExprPtr &d : se->args) {
    if (d->kind == Expr::Kind::Name && d->text == batchSymbol &&
        !batchSymbol.empty()) {
      shape.push_back(ShapedType::kDynamic);
      continue;
    }
    auto n = integer(*d, "a dimension", 1);
    if (!n)
      return {};
    shape.push_back(*n);
  }
  auto t = shape::reshape(at, x.getType(), shape);
  if (failed(t))
    return hadError = true, Value();
  return ReshapeOp::create(b, at, *t, x);
}

/// torch.arange(n): positions, int32 here.
Value Gen::genArange(const Expr &e) {
  const std::string &f = e.text;
  (void)f;
  Location at = loc(e.loc);
  if (!checkCall(e))
    return {};
  const Expr *ne = arg(e, "end", true);
  auto n = ne ? integer(*ne, "arange's end", 1) : std::nullopt;
  if (!n)
    return {};
  return ArangeOp::create(b, at, RankedTensorType::get({*n}, b.getI32Type()));
}

/// cross_entropy, its alias softmax_cross_entropy, and accuracy.
Value Gen::genClassLoss(const Expr &e) {
  const std::string &f = e.text;
  (void)f;
  Location at = loc(e.loc);
  if (!checkCall(e))
    return {};
  int64_t ignore = int64_t(defaultOf(e, "ignore_index"));
  if (const Expr *ig = arg(e, "ignore_index", false)) {
    auto v = integer(*ig, "ignore_index", INT32_MIN);
    if (!v)
      return {};
    ignore = *v;
  }
  const Expr *le = arg(e, "logits", true), *ye = arg(e, "labels", true);
  if (!le || !ye)
    return {};
  Value logits = requireF32(*le, "the logits");
  Value labels = logits ? requireLabels(*ye) : Value();
  if (!labels)
    return {};
  auto t = shape::crossEntropy(at, logits.getType(), labels.getType());
  if (failed(t))
    return hadError = true, Value();
  // The labels are class indices of one data set: every loss and metric
  // over them must agree on the number of classes.
  const int64_t numClasses =
      cast<RankedTensorType>(logits.getType()).getShape().back();
  if (!classes) {
    classes = {numClasses, e.loc, f};
  } else if (classes->count != numClasses) {
    error(le->loc) << f << "() gets logits of " << numClasses
                   << " classes, but " << classes->fn << "() at line "
                   << classes->loc.line << " gets " << classes->count
                   << "; the class labels index one set of classes";
    return {};
  }
  if (f == "accuracy")
    return AccuracyOp::create(b, at, *t, logits, labels, ignore);
  return CrossEntropyOp::create(b, at, *t, logits, labels, ignore);
}

Value Gen::genMse(const Expr &e) {
  const std::string &f = e.text;
  (void)f;
  Location at = loc(e.loc);
  if (!checkCall(e))
    return {};
  const Expr *pe = arg(e, "prediction", true), *te = arg(e, "target", true);
  if (!pe || !te)
    return {};
  Value p = requireF32(*pe, "the prediction");
  Value t = p ? requireF32(*te, "the target") : Value();
  if (!t)
    return {};
  auto rt = shape::mse(at, p.getType(), t.getType());
  if (failed(rt))
    return hadError = true, Value();
  return MseOp::create(b, at, *rt, p, t);
}

/// `h0 = checkpoint(layer(x))`: the instance, its name recorded in the
/// module's dtc.checkpoint for dtc-rematerialize.
Value Gen::genCheckpoint(const Expr &e, llvm::StringRef assignedName) {
  if (!checkCall(e))
    return {};
  const Expr *inst = arg(e, "instance", true);
  if (!inst)
    return {};
  auto it =
      inst->kind == Expr::Kind::Call ? blocks.find(inst->text) : blocks.end();
  if (it == blocks.end()) {
    error(inst->loc) << "checkpoint() takes a block instance, as in 'h0 = "
                        "checkpoint(layer(x))'";
    return {};
  }
  Value v = genBlockCall(*it->second, *inst, assignedName);
  if (!v)
    return {};
  auto *dialect = ctx->getLoadedDialect<DtcDialect>();
  SmallVector<Attribute> names;
  if (ArrayAttr old = dialect->getCheckpointAttrHelper().getAttr(module))
    names.append(old.begin(), old.end());
  names.push_back(b.getStringAttr(assignedName));
  dialect->getCheckpointAttrHelper().setAttr(module, b.getArrayAttr(names));
  return v;
}

Value Gen::genCall(const Expr &e, llvm::StringRef assignedName) {
  if (auto it = blocks.find(e.text); it != blocks.end())
    return genBlockCall(*it->second, e, assignedName);
  const Builtin *builtin = findBuiltin(e.text);
  if (!builtin) {
    error(e.loc) << "unknown function '" << e.text << "'";
    return {};
  }
  return builtin->build(*this, e, assignedName);
}

//===----------------------------------------------------------------------===//
// The registry
//===----------------------------------------------------------------------===//

size_t Builtin::maxPositional() const {
  size_t n = 0;
  for (const BuiltinParam &p : params)
    n += !p.keywordOnly;
  return n;
}

int Builtin::index(llvm::StringRef name) const {
  for (auto [i, p] : llvm::enumerate(params))
    if (name == p.name)
      return int(i);
  return -1;
}

namespace {
using Build = std::function<Value(Gen &, const Expr &, llvm::StringRef)>;

/// A builder that takes no assigned name.
template <typename F> Build unnamed(F f) {
  return [f](Gen &g, const Expr &e, llvm::StringRef) { return f(g, e); };
}
template <typename Op> Build unary() {
  return unnamed([](Gen &g, const Expr &e) { return g.genUnary<Op>(e); });
}
Build binary(char op) {
  return unnamed(
      [op](Gen &g, const Expr &e) { return g.genBinaryCall(e, op); });
}
Build layer(Value (Gen::*f)(const Expr &, llvm::StringRef)) {
  return [f](Gen &g, const Expr &e, llvm::StringRef name) {
    return (g.*f)(e, name);
  };
}
Build plain(Value (Gen::*f)(const Expr &)) {
  return unnamed([f](Gen &g, const Expr &e) { return (g.*f)(e); });
}

BuiltinParam kw(const char *name, const char *dflt) {
  return {name, dflt, /*keywordOnly=*/true};
}

std::vector<Builtin> makeBuiltins() {
  const BuiltinParam x{"x"};
  const char *elementwise = "elementwise, on f32 tensors of any shape";
  std::vector<Builtin> all = {
      // Layers: their parameters are named after the name they are
      // assigned to (docs/dsl.md, "Layers").
      {"linear",
       {x, {"units"}, kw("act", "none"), kw("bias", "true")},
       "`torch.nn.Linear`: `x @ weight^T + bias` over the last dimension, "
       "parameters `name.weight` `[units, in]` and `name.bias` `[units]`; "
       "`act` one of `relu`, `tanh`, `sigmoid`, `gelu`, `gelu_tanh`, `none`",
       layer(&Gen::genLinear)},
      {"dense",
       {x, {"units"}, kw("act", "none"), kw("bias", "true")},
       "an alias of `linear`",
       layer(&Gen::genLinear)},
      {"conv2d",
       {x,
        {"out_channels"},
        {"kernel"},
        kw("stride", "1"),
        kw("padding", "0"),
        kw("dilation", "1"),
        kw("groups", "1"),
        kw("bias", "true"),
        kw("act", "none")},
       "`torch.nn.Conv2d` on NCHW `[B, C, H, W]`: parameters `name.weight` "
       "`[out_channels, C / groups, kH, kW]` and `name.bias`; `kernel`, "
       "`stride`, `padding`, `dilation` an integer or `[h, w]`",
       layer(&Gen::genConv2d)},
      {"batch_norm",
       {x, {"momentum", "0.1"}, {"eps", "1e-5"}, kw("act", "none")},
       "`torch.nn.BatchNorm1d/2d` (channels second): parameters "
       "`name.weight`, `name.bias`, buffers `name.running_mean`, "
       "`name.running_var`, `name.num_batches_tracked`",
       layer(&Gen::genBatchNorm)},
      {"layer_norm",
       {x, {"eps", "1e-5"}},
       "`torch.nn.LayerNorm(D)` over the last dimension: parameters "
       "`name.weight` (ones), `name.bias` (zeros), `[D]`",
       layer(&Gen::genLayerNorm)},
      {"rms_norm",
       {x, {"eps", "1e-6"}},
       "`torch.nn.RMSNorm(D)` over the last dimension (LLaMA's): `x / "
       "sqrt(mean(x^2) + eps) * weight`, parameter `name.weight` (ones) `[D]`",
       layer(&Gen::genRmsNorm)},
      {"embedding",
       {{"ids"},
        {"num_embeddings"},
        {"embedding_dim"},
        kw("init", "normal(0, 1)")},
       "`torch.nn.Embedding`: the rows of `name.weight` `[num_embeddings, "
       "embedding_dim]` at the i32 `ids` (any shape)",
       layer(&Gen::genEmbedding)},
      // Activations and elementwise functions.
      {"relu", {x}, elementwise, unary<ReluOp>()},
      {"tanh", {x}, elementwise, unary<TanhOp>()},
      {"sigmoid", {x}, elementwise, unary<SigmoidOp>()},
      {"silu",
       {x},
       "`F.silu` (swish): `x * sigmoid(x)`; LLaMA's feed-forward is "
       "`silu(linear(x, h)) * linear(x, h)` (SwiGLU)",
       unary<SiluOp>()},
      {"gelu",
       {x, {"approximate", "\"none\""}},
       "`F.gelu`: exact (erf), or GPT-2's tanh form with "
       "`approximate=\"tanh\"` (computed as x·sigmoid(2u))",
       plain(&Gen::genGelu)},
      {"exp", {x}, elementwise, unary<ExpOp>()},
      {"log", {x}, elementwise, unary<LogOp>()},
      {"sqrt", {x}, elementwise, unary<SqrtOp>()},
      {"neg", {x}, "`-x`", unary<NegOp>()},
      {"add", {{"a"}, {"b"}}, "`a + b`, broadcasting (numpy)", binary('+')},
      {"sub", {{"a"}, {"b"}}, "`a - b`, broadcasting", binary('-')},
      {"mul", {{"a"}, {"b"}}, "`a * b`, broadcasting", binary('*')},
      {"div", {{"a"}, {"b"}}, "`a / b`, broadcasting", binary('/')},
      {"matmul",
       {{"a"}, {"b"}},
       "`a @ b` as `torch.matmul`: `[..., M, K] @ [..., K, N]`, the batch "
       "dimensions broadcast",
       binary('@')},
      // Shapes.
      {"reshape",
       {x, {"shape"}},
       "the same elements in a new shape such as `[B, 28, 28]` (the batch "
       "stays first)",
       plain(&Gen::genReshape)},
      {"flatten",
       {x},
       "`nn.Flatten`: every dimension after the first in one",
       plain(&Gen::genFlatten)},
      {"transpose",
       {x, {"dim0", "none"}, {"dim1", "none"}},
       "`torch.transpose`: two dimensions swapped; `transpose(x)` reverses "
       "them all, `transpose(x, [1, 0, 2])` permutes",
       plain(&Gen::genTranspose)},
      {"permute",
       {x, {"dims"}},
       "`torch.permute`; the batch dimension stays first",
       plain(&Gen::genTranspose)},
      {"split",
       {x, {"chunks"}, kw("axis", "-1")},
       "`torch.chunk` into equal pieces along the axis, one name each: `q, "
       "k, v = split(x, 3, axis=-1)`",
       unnamed([](Gen &g, const Expr &e) {
         g.error(e.loc) << "split() gives several values: assign one name "
                           "to each, as in 'q, k, v = split(x, 3, axis=-1)'";
         return Value();
       })},
      {"concat",
       {{"tensors"}, {"axis", "-1"}},
       "`torch.cat` of a list of tensors along the axis",
       plain(&Gen::genConcat)},
      {"arange",
       {{"end"}},
       "`torch.arange(end)`: the positions `0 … end−1`, i32 `[end]`",
       plain(&Gen::genArange)},
      // Reductions and normalizations.
      {"sum",
       {x, {"axis", "none"}, kw("keepdims", "false")},
       "the sum over one axis, or over all without `axis`",
       unnamed([](Gen &g, const Expr &e) { return g.genReduce(e, "sum"); })},
      {"mean",
       {x, {"axis", "none"}, kw("keepdims", "false")},
       "the mean over one axis, or over all",
       unnamed([](Gen &g, const Expr &e) { return g.genReduce(e, "mean"); })},
      {"max",
       {x, {"axis", "none"}, kw("keepdims", "false")},
       "the maximum over one axis, or over all",
       unnamed([](Gen &g, const Expr &e) { return g.genReduce(e, "max"); })},
      {"softmax",
       {x, {"axis", "-1"}},
       "softmax along an axis",
       plain(&Gen::genSoftmax)},
      {"log_softmax",
       {x, {"axis", "-1"}},
       "log-softmax along an axis",
       plain(&Gen::genSoftmax)},
      // Convolution networks.
      {"max_pool2d",
       {x, {"kernel"}, {"stride", "kernel"}, {"padding", "0"}},
       "`F.max_pool2d` on `[B, C, H, W]`",
       plain(&Gen::genPool2d)},
      {"avg_pool2d",
       {x,
        {"kernel"},
        {"stride", "kernel"},
        {"padding", "0"},
        kw("count_include_pad", "true")},
       "`F.avg_pool2d` on `[B, C, H, W]`",
       plain(&Gen::genPool2d)},
      {"adaptive_avg_pool2d",
       {x, {"output_size"}},
       "global average pooling, `[B, C, H, W]` → `[B, C, 1, 1]` (output "
       "size 1 only)",
       plain(&Gen::genAdaptiveAvgPool2d)},
      {"checkpoint",
       {{"instance"}},
       "`torch.utils.checkpoint`: a block instance, `h0 = "
       "checkpoint(layer(x))`, that keeps only its input for backward and "
       "computes its forward again there (`dtc --remat=blocks`: every "
       "instance)",
       layer(&Gen::genCheckpoint)},
      {"dropout",
       {x, {"p", "0.5"}},
       "inverted dropout in training (`F.dropout`), the identity in "
       "evaluation",
       plain(&Gen::genDropout)},
      // Attention.
      {"scaled_dot_product_attention",
       {{"query"},
        {"key"},
        {"value"},
        kw("is_causal", "false"),
        {"causal", nullptr, true, /*hidden=*/true},
        kw("scale", "1/sqrt(D)")},
       "`F.scaled_dot_product_attention` on `[..., T, D]`, one fused kernel "
       "(`causal` is an alias of `is_causal`)",
       plain(&Gen::genAttention)},
      // Losses and metrics.
      {"cross_entropy",
       {{"logits"}, {"labels"}, kw("ignore_index", "-100")},
       "`F.cross_entropy`: the mean over the rows whose label is not "
       "`ignore_index`, `[N, ..., C]` logits against i32 `[N, ...]` labels",
       plain(&Gen::genClassLoss)},
      {"softmax_cross_entropy",
       {{"logits"}, {"labels"}, kw("ignore_index", "-100")},
       "an alias of `cross_entropy`",
       plain(&Gen::genClassLoss)},
      {"accuracy",
       {{"logits"}, {"labels"}, kw("ignore_index", "-100")},
       "the fraction of rows (not ignored) whose arg-max is the label (a "
       "metric)",
       plain(&Gen::genClassLoss)},
      {"mse",
       {{"prediction"}, {"target"}},
       "the mean squared error over all elements",
       plain(&Gen::genMse)},
  };
  return all;
}
} // namespace

llvm::ArrayRef<Builtin> dtc::dsl::builtins() {
  static const std::vector<Builtin> all = makeBuiltins();
  return all;
}

const Builtin *dtc::dsl::findBuiltin(llvm::StringRef name) {
  for (const Builtin &b : builtins())
    if (name == b.name)
      return &b;
  return nullptr;
}

void dtc::dsl::printBuiltinTable(llvm::raw_ostream &os) {
  os << "| builtin | what it computes |\n| --- | --- |\n";
  for (const Builtin &b : builtins()) {
    os << "| `" << b.name << "(";
    bool first = true, named = false;
    for (const BuiltinParam &p : b.params) {
      if (p.hidden)
        continue;
      if (p.keywordOnly && !named) { // Python's marker of keyword-only ones
        os << (first ? "" : ", ") << "*";
        first = false;
        named = true;
      }
      os << (first ? "" : ", ") << p.name;
      if (p.dflt)
        os << "=" << p.dflt;
      first = false;
    }
    os << ")` | " << b.doc << " |\n";
  }
}

//===----------------------------------------------------------------------===//
// Checking a call against its entry
//===----------------------------------------------------------------------===//

bool Gen::checkCall(const Expr &call) {
  const Builtin *builtin = findBuiltin(call.text);
  assert(builtin && "a builtin's builder checks its own call");
  SmallVector<llvm::StringRef> keywords;
  for (const BuiltinParam &p : builtin->params)
    keywords.push_back(p.name);
  return checkArgs(call, builtin->maxPositional(), keywords);
}

double Gen::defaultOf(const Expr &call, llvm::StringRef param) {
  const Builtin *builtin = findBuiltin(call.text);
  int i = builtin ? builtin->index(param) : -1;
  double v = 0;
  [[maybe_unused]] bool bad =
      i < 0 || !builtin->params[size_t(i)].dflt ||
      llvm::StringRef(builtin->params[size_t(i)].dflt).getAsDouble(v);
  assert(!bad && "the registry gives this parameter a numeric default");
  return v;
}

const Expr *Gen::arg(const Expr &call, llvm::StringRef name, bool required) {
  const Builtin *builtin = findBuiltin(call.text);
  int i = builtin ? builtin->index(name) : -1;
  const bool positional = i >= 0 && !builtin->params[size_t(i)].keywordOnly;
  return arg(call, positional ? size_t(i) : SIZE_MAX, name, required);
}
