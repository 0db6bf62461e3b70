//===- MLIRGen.cpp - From the syntax tree to the dtc dialect --------------===//
//
// Semantic checks (names, types, shapes) happen here, each reported at the
// DSL location it concerns. Shapes are checked with the same functions the
// ops' shape inference uses (dialects/dtc/ShapeInference.h), before any op is
// built, so every op this produces verifies.
//
//===----------------------------------------------------------------------===//
#include "frontends/dsl/MLIRGen.h"

#include "dialects/dtc/DtcDialect.h"
#include "dialects/dtc/ShapeInference.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"
#include <array>
#include <climits>
#include <cmath>
#include <cstdio>
#include <optional>

using namespace mlir;
using namespace dtc;
using namespace dtc::dsl;

namespace {

class Gen {
public:
  Gen(MLIRContext *ctx, llvm::StringRef filename)
      : ctx(ctx), filename(filename.str()), b(ctx) {}

  OwningOpRef<ModuleOp> run(const Program &p);

private:
  // Diagnostics ---------------------------------------------------------------
  Location loc(Loc l) {
    return FileLineColLoc::get(ctx, filename, l.line, l.col);
  }
  InFlightDiagnostic error(Loc l) {
    hadError = true;
    return emitError(loc(l));
  }

  // The first cross_entropy/accuracy: the number of classes every other one
  // must have.
  struct Classes {
    int64_t count;
    Loc loc;
    std::string fn;
  };
  std::optional<Classes> classes;
  // The model's input (text data checks its window against it).
  RankedTensorType inputType;

  // Declarations --------------------------------------------------------------
  RankedTensorType declaredType(const TypeDecl &t, bool allowBatch);
  bool declare(const std::string &name, Loc l, Value v);
  Value declareParam(const std::string &name, Loc l, RankedTensorType type,
                     InitKind init, double a, double bb);
  /// A non-trainable buffer (dtc.buffer) filled with `value`; its f32 value
  /// read where the function is being built (null for an i64 buffer).
  Value declareBuffer(const std::string &name, Loc l, RankedTensorType type,
                      double value);
  /// Claims `name` for a parameter or buffer; false after an error.
  bool claimStateName(const std::string &name, Loc l);
  Value paramFromDecl(const Stmt &s);
  struct Init {
    InitKind kind;
    double a, b;
  };
  std::optional<Init> initOf(const Expr &e);

  // Expressions ---------------------------------------------------------------
  Value gen(const Expr &e, llvm::StringRef assignedName = "");
  Value genCall(const Expr &e, llvm::StringRef assignedName);
  Value genBinary(char op, Loc l, Value lhs, Value rhs);
  Value genMatmul(Loc l, Value lhs, Value rhs);
  Value genTranspose(const Expr &e);
  SmallVector<Value> genSplit(const Expr &e, size_t names);
  Value genConcat(const Expr &e);
  Value genLinear(const Expr &e, llvm::StringRef assignedName);
  Value genReduce(const Expr &e, llvm::StringRef kind);
  Value genConv2d(const Expr &e, llvm::StringRef assignedName);
  Value genPool2d(const Expr &e);
  Value genAdaptiveAvgPool2d(const Expr &e);
  Value genFlatten(const Expr &e);
  Value genDropout(const Expr &e);
  Value genBatchNorm(const Expr &e, llvm::StringRef assignedName);
  Value genLayerNorm(const Expr &e, llvm::StringRef assignedName);
  Value genEmbedding(const Expr &e, llvm::StringRef assignedName);
  Value genAttention(const Expr &e);
  std::optional<double> epsOf(const Expr &call, size_t pos, double dflt);
  Value activation(const Expr &call, Value y);
  Value requireF32(const Expr &e, llvm::StringRef what);
  Value requireLabels(const Expr &e);
  Value scalar(double v, Loc l);

  // Arguments of builtins
  // ------------------------------------------------------
  /// The argument at `pos` or the keyword `name`; null (after an error when
  /// `required`) if absent.
  const Expr *arg(const Expr &call, size_t pos, llvm::StringRef name,
                  bool required);
  bool checkArgs(const Expr &call, size_t maxPositional,
                 llvm::ArrayRef<llvm::StringRef> keywords);
  std::optional<double> number(const Expr &e, llvm::StringRef what);
  std::optional<int64_t> integer(const Expr &e, llvm::StringRef what,
                                 int64_t min);
  std::optional<std::string> string(const Expr &e, llvm::StringRef what);
  std::optional<bool> boolean(const Expr &e, llvm::StringRef what);
  /// An int or a pair [h, w] of ints, each >= min (PyTorch's int or tuple).
  std::optional<std::array<int64_t, 2>>
  pairOf(const Expr &e, llvm::StringRef what, int64_t min);
  std::optional<int64_t> axisOf(const Expr &call, size_t pos, int64_t rank,
                                std::optional<int64_t> dflt);
  /// A dimension of a rank-`rank` tensor, -rank..rank-1 (negative from the
  /// end, as PyTorch's dims), normalized to >= 0.
  std::optional<int64_t> dimOf(const Expr &e, int64_t rank);

  // Recipe
  // ---------------------------------------------------------------------
  /// The recipe's data set: its kind and where it is.
  struct Data {
    DataKind kind = DataKind::None;
    std::string dir, train, test;
    int64_t trainSize = 0, testSize = 0;
  };
  void genRecipe(const Program &p);
  OptimizerAttr genOptimizer(const Expr &e);
  ScheduleAttr genSchedule(const Expr &e);
  void genData(const Expr &e, Data &data);

  MLIRContext *ctx;
  std::string filename;
  OpBuilder b;
  ModuleOp module;
  mlir::Block *body = nullptr; // @forward's entry block
  llvm::StringMap<std::pair<Value, Loc>> names;
  llvm::StringSet<> paramNames;
  llvm::StringSet<> poisoned; // names whose definition failed
  // Blocks by name; while one is instantiated, the prefix of its names
  // ("h0", "h0.attn") and the blocks being instantiated (no recursion).
  llvm::StringMap<const dsl::Block *> blocks;
  std::string prefix;
  llvm::SmallVector<llvm::StringRef> active;
  Value genBlockCall(const dsl::Block &blk, const Expr &e,
                     llvm::StringRef assignedName);
  void genTuple(const Stmt &s);
  std::string batchSymbol;
  Loc batchLoc;
  bool hadError = false;
  std::optional<double> lrOverride;
  int64_t dropouts = 0; // the salt of the next dropout (its own mask)
};

} // namespace

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

RankedTensorType Gen::declaredType(const TypeDecl &t, bool allowBatch) {
  SmallVector<int64_t> shape;
  for (auto [i, d] : llvm::enumerate(t.dims)) {
    if (d.symbol.empty()) {
      shape.push_back(d.size);
      continue;
    }
    if (!allowBatch) {
      error(d.loc) << "parameter shapes must be fixed sizes; '" << d.symbol
                   << "' is not a number";
      return {};
    }
    if (i != 0) {
      error(d.loc) << "the batch dimension '" << d.symbol
                   << "' must be the first dimension";
      return {};
    }
    if (batchSymbol.empty()) {
      batchSymbol = d.symbol;
      batchLoc = d.loc;
    } else if (batchSymbol != d.symbol) {
      error(d.loc) << "batch dimension '" << d.symbol << "' differs from '"
                   << batchSymbol << "' declared at line " << batchLoc.line;
      return {};
    }
    shape.push_back(ShapedType::kDynamic);
  }
  if (failed(shape::size(loc(t.loc), shape))) {
    hadError = true;
    return {};
  }
  Type elem =
      t.elementType == "f32" ? Type(b.getF32Type()) : Type(b.getI32Type());
  return RankedTensorType::get(shape, elem);
}

bool Gen::declare(const std::string &name, Loc l, Value v) {
  auto it = names.find(name);
  if (it != names.end()) {
    error(l) << "redefinition of '" << name << "' (first defined at line "
             << it->second.second.line << ")";
    return false;
  }
  names[name] = {v, l};
  return true;
}

bool Gen::claimStateName(const std::string &name, Loc l) {
  if (!paramNames.insert(name).second) {
    error(l) << "parameter '" << name << "' is defined twice";
    return false;
  }
  if (name == "__metadata__") {
    error(l) << "'__metadata__' cannot name a parameter: checkpoints "
                "(safetensors) keep "
                "their metadata under that key";
    return false;
  }
  return true;
}

Value Gen::declareBuffer(const std::string &name, Loc l, RankedTensorType type,
                         double value) {
  if (!claimStateName(name, l))
    return {};
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(body->getParentOp());
  BufferOp::create(b, loc(l), b.getStringAttr(name), TypeAttr::get(type),
                   b.getF64FloatAttr(value));
  if (!type.getElementType().isF32())
    return {};
  OpBuilder::InsertionGuard g2(b);
  b.setInsertionPointToEnd(body);
  return ParamRefOp::create(b, loc(l), type, FlatSymbolRefAttr::get(ctx, name));
}

Value Gen::declareParam(const std::string &name, Loc l, RankedTensorType type,
                        InitKind init, double a, double bb) {
  if (!claimStateName(name, l))
    return {};
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  // Parameters go before the function so that the module reads top-down.
  b.setInsertionPoint(body->getParentOp());
  ParamOp::create(b, loc(l), b.getStringAttr(name), TypeAttr::get(type),
                  InitKindAttr::get(ctx, init), b.getF64FloatAttr(a),
                  b.getF64FloatAttr(bb));
  OpBuilder::InsertionGuard g2(b);
  b.setInsertionPointToEnd(body);
  return ParamRefOp::create(b, loc(l), type, FlatSymbolRefAttr::get(ctx, name));
}

/// An initializer call: zeros(), constant(v), uniform(low, high),
/// normal(mean, std), glorot_uniform(), ... (and PyTorch's names for them).
std::optional<Gen::Init> Gen::initOf(const Expr &e) {
  if (e.kind != Expr::Kind::Call) {
    error(e.loc) << "expected an initializer call such as normal(0, 0.01)";
    return std::nullopt;
  }
  // The dialect's names, and PyTorch's for the same initializers.
  static const llvm::StringMap<InitKind> aliases = {
      {"xavier_uniform", InitKind::GlorotUniform},
      {"xavier_normal", InitKind::GlorotNormal},
      {"kaiming_uniform", InitKind::HeUniform},
      {"kaiming_normal", InitKind::HeNormal}};
  auto it = aliases.find(e.text);
  std::optional<InitKind> kind = it != aliases.end()
                                     ? std::optional(it->second)
                                     : symbolizeInitKind(e.text);
  if (!kind) {
    error(e.loc) << "unknown initializer '" << e.text
                 << "' (expected zeros, constant, uniform, normal, "
                    "glorot_uniform, glorot_normal, he_uniform, he_normal)";
    return std::nullopt;
  }
  Init init{*kind, 0, 0};
  if (init.kind == InitKind::Constant) {
    if (!checkArgs(e, 1, {"value"}))
      return std::nullopt;
    const Expr *v = arg(e, 0, "value", true);
    auto x = v ? number(*v, "the constant") : std::nullopt;
    if (!x)
      return std::nullopt;
    init.a = *x;
  } else if (init.kind == InitKind::Uniform || init.kind == InitKind::Normal) {
    bool u = init.kind == InitKind::Uniform;
    llvm::StringRef n0 = u ? "low" : "mean", n1 = u ? "high" : "std";
    if (!checkArgs(e, 2, {n0, n1}))
      return std::nullopt;
    const Expr *e0 = arg(e, 0, n0, false), *e1 = arg(e, 1, n1, false);
    init.a = u ? -0.05 : 0.0;
    init.b = u ? 0.05 : 1.0;
    if (e0) {
      auto x = number(*e0, n0);
      if (!x)
        return std::nullopt;
      init.a = *x;
    }
    if (e1) {
      auto x = number(*e1, n1);
      if (!x)
        return std::nullopt;
      init.b = *x;
    }
    if (u && !(init.a < init.b)) {
      error(e.loc) << "uniform needs low < high";
      return std::nullopt;
    }
    if (!u && init.b < 0) {
      error(e.loc) << "normal needs std >= 0";
      return std::nullopt;
    }
  } else if (!checkArgs(e, 0, {})) {
    return std::nullopt;
  }
  return init;
}

/// `param w: f32[784, 10] = glorot_uniform()`
Value Gen::paramFromDecl(const Stmt &s) {
  RankedTensorType type = declaredType(s.type, /*allowBatch=*/false);
  if (!type)
    return {};
  if (type.getElementType() != b.getF32Type()) {
    error(s.type.loc) << "parameters are f32";
    return {};
  }
  Init init{InitKind::Zeros, 0, 0};
  if (s.value) {
    auto i = initOf(*s.value);
    if (!i)
      return {};
    init = *i;
  }
  return declareParam(s.name, s.nameLoc, type, init.kind, init.a, init.b);
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

Value Gen::scalar(double v, Loc l) {
  return ConstantOp::create(b, loc(l),
                            RankedTensorType::get({}, b.getF32Type()),
                            b.getF32FloatAttr(v));
}

Value Gen::requireF32(const Expr &e, llvm::StringRef what) {
  Value v = gen(e);
  if (!v)
    return {};
  if (cast<RankedTensorType>(v.getType()).getElementType() != b.getF32Type()) {
    error(e.loc) << what
                 << " must be an f32 tensor, but it is i32 (labels or token "
                 << "ids); only embedding, cross_entropy and accuracy take "
                 << "i32";
    return {};
  }
  return v;
}

Value Gen::requireLabels(const Expr &e) {
  Value v = gen(e);
  if (!v)
    return {};
  if (cast<RankedTensorType>(v.getType()).getElementType() != b.getI32Type()) {
    error(e.loc) << "expected i32 class labels, got an f32 tensor "
                 << shape::str(v.getType());
    return {};
  }
  return v;
}

/// a @ b as torch.matmul: a 1-D lhs is a row [1, K] and a 1-D rhs a
/// column [K, 1], the added dimension dropped from the result; the leading
/// (batch) dimensions of operands of rank 3 or more broadcast (numpy),
/// except that a 2-D rhs is applied to every row of the lhs as it is.
Value Gen::genMatmul(Loc l, Value lhs, Value rhs) {
  Location at = loc(l);
  auto shapeOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  auto f32 = b.getF32Type();
  auto reshaped = [&](Value v, ArrayRef<int64_t> shape) -> Value {
    return ReshapeOp::create(b, at, RankedTensorType::get(shape, f32), v);
  };
  if (shapeOf(lhs).empty() || shapeOf(rhs).empty()) {
    error(l) << "matmul needs tensors of at least 1 dimension, got "
             << shape::str(lhs.getType()) << " and "
             << shape::str(rhs.getType());
    return {};
  }
  const bool row = shapeOf(lhs).size() == 1, column = shapeOf(rhs).size() == 1;
  if (row)
    lhs = reshaped(lhs, {1, shapeOf(lhs)[0]});
  if (column)
    rhs = reshaped(rhs, {shapeOf(rhs)[0], 1});
  if (shapeOf(rhs).size() > 2) {
    // Both to the broadcast of their leading dimensions.
    auto lead = [&](Value v) {
      return RankedTensorType::get(shapeOf(v).drop_back(2), f32);
    };
    auto common = shape::broadcast(std::nullopt, lead(lhs), lead(rhs));
    if (failed(common)) {
      error(l) << "matmul leading (batch) dimensions " << shape::str(lead(lhs))
               << " and " << shape::str(lead(rhs))
               << " do not broadcast: " << shape::str(lhs.getType()) << " @ "
               << shape::str(rhs.getType());
      return {};
    }
    for (Value *v : {&lhs, &rhs}) {
      SmallVector<int64_t> to(common->getShape());
      to.append(shapeOf(*v).take_back(2).begin(),
                shapeOf(*v).take_back(2).end());
      if (ArrayRef<int64_t>(to) != shapeOf(*v))
        *v = BroadcastToOp::create(b, at, RankedTensorType::get(to, f32), *v);
    }
  }
  auto t = shape::matmul(at, lhs.getType(), rhs.getType(), false, false);
  if (failed(t))
    return hadError = true, Value();
  Value y = MatmulOp::create(b, at, *t, lhs, rhs, false, false);
  SmallVector<int64_t> out(t->getShape());
  if (column)
    out.erase(out.end() - 1);
  if (row)
    out.erase(out.end() - 1 - (column ? 0 : 1));
  if (row || column)
    y = reshaped(y, out);
  return y;
}

Value Gen::genBinary(char op, Loc l, Value lhs, Value rhs) {
  Location at = loc(l);
  if (op == '@')
    return genMatmul(l, lhs, rhs);
  auto t = shape::broadcast(at, lhs.getType(), rhs.getType());
  if (failed(t))
    return hadError = true, Value();
  switch (op) {
  case '+':
    return AddOp::create(b, at, *t, lhs, rhs);
  case '-':
    return SubOp::create(b, at, *t, lhs, rhs);
  case '*':
    return MulOp::create(b, at, *t, lhs, rhs);
  default:
    return DivOp::create(b, at, *t, lhs, rhs);
  }
}

Value Gen::gen(const Expr &e, llvm::StringRef assignedName) {
  switch (e.kind) {
  case Expr::Kind::Number:
    return scalar(e.number, e.loc);
  case Expr::Kind::Name: {
    auto it = names.find(e.text);
    if (poisoned.contains(e.text))
      return {}; // its definition already failed with an error
    if (it == names.end()) {
      // A layer's parameter by its full name (`wte.weight`): the same
      // parameter read again (GPT-2's output head tied to the token
      // embedding); its gradients add up.
      // Inside a block, its own layers' first (`ln1.weight` of instance
      // h0 is h0.ln1.weight).
      for (const std::string &n :
           {prefix.empty() ? std::string() : prefix + "." + e.text, e.text})
        if (!n.empty())
          if (auto p = module.lookupSymbol<ParamOp>(n))
            return ParamRefOp::create(b, loc(e.loc), p.getType(),
                                      FlatSymbolRefAttr::get(ctx, n));
      InFlightDiagnostic d = error(e.loc);
      d << "unknown name '" << e.text << "'";
      if (llvm::StringRef(e.text).contains('.'))
        d << " (a dotted name is a layer's parameter, usable after the "
             "layer that declares it)";
      return {};
    }
    return it->second.first;
  }
  case Expr::Kind::Neg: {
    Value x = requireF32(*e.args[0], "the operand of '-'");
    return x ? NegOp::create(b, loc(e.loc), x.getType(), x) : Value();
  }
  case Expr::Kind::Binary: {
    std::string what = std::string("an operand of '") + e.op + "'";
    Value l = requireF32(*e.args[0], what);
    if (!l)
      return {};
    Value r = requireF32(*e.args[1], what);
    if (!r)
      return {};
    return genBinary(e.op, e.loc, l, r);
  }
  case Expr::Kind::Call:
    return genCall(e, assignedName);
  case Expr::Kind::String:
  case Expr::Kind::List:
    error(e.loc) << "expected a tensor expression";
    return {};
  }
  return {};
}

const Expr *Gen::arg(const Expr &call, size_t pos, llvm::StringRef name,
                     bool required) {
  if (pos < call.args.size())
    return call.args[pos].get();
  for (const KeywordArg &k : call.kwargs)
    if (k.name == name)
      return k.value.get();
  if (required)
    error(call.loc) << call.text << "() needs the argument '" << name << "'";
  return nullptr;
}

bool Gen::checkArgs(const Expr &call, size_t maxPositional,
                    llvm::ArrayRef<llvm::StringRef> keywords) {
  if (call.args.size() > maxPositional) {
    error(call.args[maxPositional]->loc)
        << call.text << "() takes at most " << maxPositional
        << " positional argument" << (maxPositional == 1 ? "" : "s");
    return false;
  }
  for (const KeywordArg &k : call.kwargs) {
    auto it = llvm::find(keywords, k.name);
    if (it == keywords.end()) {
      auto d = error(k.loc);
      d << call.text << "() has no argument '" << k.name << "'";
      if (!keywords.empty()) {
        d << " (expected";
        for (auto kw : keywords)
          d << " " << kw;
        d << ")";
      }
      return false;
    }
    if ((size_t)(it - keywords.begin()) < call.args.size()) {
      error(k.loc) << call.text << "() got '" << k.name << "' twice";
      return false;
    }
  }
  return true;
}

std::optional<double> Gen::number(const Expr &e, llvm::StringRef what) {
  if (e.kind != Expr::Kind::Number) {
    error(e.loc) << "expected a number for " << what;
    return std::nullopt;
  }
  return e.number;
}

std::optional<int64_t> Gen::integer(const Expr &e, llvm::StringRef what,
                                    int64_t min) {
  if (e.kind != Expr::Kind::Number || !e.isInteger || e.number < min ||
      e.number > double(shape::kMaxElements)) {
    error(e.loc) << "expected an integer from " << min << " to 2^40 for "
                 << what;
    return std::nullopt;
  }
  return (int64_t)e.number;
}

std::optional<std::string> Gen::string(const Expr &e, llvm::StringRef what) {
  if (e.kind != Expr::Kind::String) {
    error(e.loc) << "expected a string for " << what;
    return std::nullopt;
  }
  return e.text;
}

std::optional<bool> Gen::boolean(const Expr &e, llvm::StringRef what) {
  if (e.kind == Expr::Kind::Name && (e.text == "true" || e.text == "false"))
    return e.text == "true";
  error(e.loc) << "expected true or false for " << what;
  return std::nullopt;
}

std::optional<int64_t> Gen::dimOf(const Expr &e, int64_t rank) {
  if (e.kind != Expr::Kind::Number || !e.isInteger || e.number < -rank ||
      e.number >= rank) {
    error(e.loc) << "expected a dimension from " << -rank << " to " << rank - 1
                 << " of a rank-" << rank << " tensor";
    return std::nullopt;
  }
  int64_t d = (int64_t)e.number;
  return d < 0 ? d + rank : d;
}

std::optional<int64_t> Gen::axisOf(const Expr &call, size_t pos, int64_t rank,
                                   std::optional<int64_t> dflt) {
  const Expr *a = arg(call, pos, "axis", !dflt);
  if (!a)
    return dflt ? std::optional<int64_t>(*dflt < 0 ? *dflt + rank : *dflt)
                : std::nullopt;
  if (a->kind != Expr::Kind::Number || !a->isInteger ||
      std::fabs(a->number) > 64) {
    error(a->loc) << "expected an integer axis from " << -rank << " to "
                  << rank - 1;
    return std::nullopt;
  }
  int64_t ax = (int64_t)a->number;
  if (ax < -rank || ax >= rank) {
    error(a->loc) << "axis " << ax << " is out of range for a rank-" << rank
                  << " tensor";
    return std::nullopt;
  }
  return ax < 0 ? ax + rank : ax;
}

/// linear(x, units, act=relu, bias=true): x @ weight^T + bias, with
/// parameters `<name>.weight` [units, in] and `<name>.bias` [units] laid out
/// as torch.nn.Linear, initialized as PyTorch does (U(+-1/sqrt(in))).
Value Gen::genLinear(const Expr &e, llvm::StringRef assignedName) {
  if (assignedName.empty()) {
    error(e.loc) << e.text << "() must be assigned to a name (the name of its "
                 << "parameters), as in 'fc1 = " << e.text << "(x, 128)'";
    return {};
  }
  if (!checkArgs(e, 2, {"x", "units", "act", "bias"}))
    return {};
  const Expr *xe = arg(e, 0, "x", true), *ue = arg(e, 1, "units", true);
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
  if (const Expr *be = arg(e, 99, "bias", false)) {
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
  const Expr *a = arg(call, 99, "act", false);
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
  if (!checkArgs(e, 3,
                 {"x", "out_channels", "kernel", "stride", "padding",
                  "dilation", "groups", "bias", "act"}))
    return {};
  const Expr *xe = arg(e, 0, "x", true), *oe = arg(e, 1, "out_channels", true),
             *ke = arg(e, 2, "kernel", true);
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
    if (const Expr *pe = arg(e, 99, p.name, false)) {
      auto v = pairOf(*pe, p.what, p.min);
      if (!v)
        return {};
      *p.into = *v;
    }
  int64_t groups = 1;
  if (const Expr *ge = arg(e, 99, "groups", false)) {
    auto g = integer(*ge, "groups", 1);
    if (!g)
      return {};
    groups = *g;
  }
  bool hasBias = true;
  if (const Expr *be = arg(e, 99, "bias", false)) {
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
  SmallVector<llvm::StringRef> keys{"x", "kernel", "stride", "padding"};
  if (!isMax)
    keys.push_back("count_include_pad");
  if (!checkArgs(e, 4, keys))
    return {};
  const Expr *xe = arg(e, 0, "x", true), *ke = arg(e, 1, "kernel", true);
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
  if (const Expr *se = arg(e, 2, "stride", false)) {
    auto v = pairOf(*se, "the stride", 1);
    if (!v)
      return {};
    w.stride = *v;
  }
  if (const Expr *pe = arg(e, 3, "padding", false)) {
    auto v = pairOf(*pe, "the padding", 0);
    if (!v)
      return {};
    w.padding = *v;
  }
  bool includePad = true;
  if (!isMax)
    if (const Expr *ce = arg(e, 99, "count_include_pad", false)) {
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
  if (!checkArgs(e, 2, {"x", "output_size"}))
    return {};
  const Expr *xe = arg(e, 0, "x", true), *oe = arg(e, 1, "output_size", true);
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
  if (!checkArgs(e, 1, {"x"}))
    return {};
  const Expr *xe = arg(e, 0, "x", true);
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
std::optional<double> Gen::epsOf(const Expr &call, size_t pos, double dflt) {
  const Expr *ee = arg(call, pos, "eps", false);
  if (!ee)
    return dflt;
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
Value Gen::genLayerNorm(const Expr &e, llvm::StringRef assignedName) {
  if (assignedName.empty()) {
    error(e.loc) << "layer_norm() must be assigned to a name (the name of its "
                    "parameters), as in 'ln1 = layer_norm(x)'";
    return {};
  }
  if (!checkArgs(e, 2, {"x", "eps"}))
    return {};
  const Expr *xe = arg(e, 0, "x", true);
  Value x = xe ? requireF32(*xe, "the input of layer_norm()") : Value();
  if (!x)
    return {};
  auto xt = cast<RankedTensorType>(x.getType());
  if (xt.getRank() < 2 || ShapedType::isDynamic(xt.getShape().back())) {
    error(xe->loc) << "layer_norm() normalizes the last dimension of an input "
                      "[B, ..., D], got "
                   << shape::str(xt);
    return {};
  }
  auto eps = epsOf(e, 1, 1e-5);
  if (!eps)
    return {};
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
                                b.getF64FloatAttr(*eps));
  return ln.getResult();
}

/// embedding(ids, num_embeddings, embedding_dim, init=normal(0, 1)):
/// torch.nn.Embedding, the rows of `<name>.weight` [num, dim] at the i32
/// ids (any shape), N(0, 1) as PyTorch initializes it.
Value Gen::genEmbedding(const Expr &e, llvm::StringRef assignedName) {
  if (assignedName.empty()) {
    error(e.loc) << "embedding() must be assigned to a name (the name of its "
                    "table), as in 'wte = embedding(ids, 256, 128)'";
    return {};
  }
  if (!checkArgs(e, 3, {"ids", "num_embeddings", "embedding_dim", "init"}))
    return {};
  const Expr *ie = arg(e, 0, "ids", true),
             *ne = arg(e, 1, "num_embeddings", true),
             *de = arg(e, 2, "embedding_dim", true);
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
  if (const Expr *ie2 = arg(e, 99, "init", false)) {
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
  if (!checkArgs(e, 3,
                 {"query", "key", "value", "is_causal", "causal", "scale"}))
    return {};
  const Expr *qe = arg(e, 0, "query", true), *ke = arg(e, 1, "key", true),
             *ve = arg(e, 2, "value", true);
  if (!qe || !ke || !ve)
    return {};
  Value q = requireF32(*qe, "the query");
  Value k = q ? requireF32(*ke, "the key") : Value();
  Value v = k ? requireF32(*ve, "the value") : Value();
  if (!v)
    return {};
  bool causal = false;
  for (const char *name : {"is_causal", "causal"})
    if (const Expr *ce = arg(e, 99, name, false)) {
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
  if (const Expr *se = arg(e, 99, "scale", false)) {
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
  if (!checkArgs(e, 3, {"x", "momentum", "eps", "act"}))
    return {};
  const Expr *xe = arg(e, 0, "x", true);
  Value x = xe ? requireF32(*xe, "the input of batch_norm()") : Value();
  if (!x)
    return {};
  double momentum = 0.1, eps = 1e-5;
  if (const Expr *me = arg(e, 1, "momentum", false)) {
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
  if (auto v = epsOf(e, 2, eps))
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
  const Expr *act = arg(e, 99, "act", false);
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
  if (!checkArgs(e, 2, {"x", "p"}))
    return {};
  const Expr *xe = arg(e, 0, "x", true);
  Value x = xe ? requireF32(*xe, "the input of dropout()") : Value();
  if (!x)
    return {};
  double p = 0.5;
  if (const Expr *pe = arg(e, 1, "p", false)) {
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
  if (!checkArgs(e, 2, {"x", "axis", "keepdims"}))
    return {};
  const Expr *xe = arg(e, 0, "x", true);
  if (!xe)
    return {};
  Value x = requireF32(*xe, "the input of " + e.text + "()");
  if (!x)
    return {};
  auto xt = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> axes;
  if (arg(e, 1, "axis", false)) {
    auto ax = axisOf(e, 1, xt.getRank(), std::nullopt);
    if (!ax)
      return {};
    axes.push_back(*ax);
  } else {
    for (int64_t i = xt.getRank() - 1; i >= 0; --i)
      axes.push_back(i);
  }
  bool keepdims = false;
  if (const Expr *k = arg(e, 99, "keepdims", false)) {
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
  if (!checkArgs(e, 2, {"x", "chunks", "axis"}))
    return {};
  const Expr *xe = arg(e, 0, "x", true), *ce = arg(e, 1, "chunks", true);
  Value x = xe ? requireF32(*xe, "the input of split()") : Value();
  auto chunks =
      x && ce ? integer(*ce, "the number of pieces", 1) : std::nullopt;
  if (!chunks)
    return {};
  auto xt = cast<RankedTensorType>(x.getType());
  auto ax = axisOf(e, 2, xt.getRank(), -1);
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
  if (!checkArgs(e, 2, {"tensors", "axis"}))
    return {};
  const Expr *le = arg(e, 0, "tensors", true);
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
  auto ax =
      axisOf(e, 1, cast<RankedTensorType>(inputs[0].getType()).getRank(), -1);
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
  if (!checkArgs(e, isPermute ? 2 : 3,
                 isPermute ? SmallVector<llvm::StringRef>{"x", "dims"}
                           : SmallVector<llvm::StringRef>{"x", "dim0", "dim1"}))
    return {};
  const Expr *xe = arg(e, 0, "x", true);
  Value x = xe ? requireF32(*xe, "the input of " + f + "()") : Value();
  if (!x)
    return {};
  Location at = loc(e.loc);
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<int64_t> perm;
  const Expr *first = arg(e, 1, isPermute ? "dims" : "dim0", isPermute);
  if (isPermute && !first)
    return {};
  if (first && first->kind == Expr::Kind::List) {
    if (!isPermute && arg(e, 2, "dim1", false)) {
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
    const Expr *second = arg(e, 2, "dim1", true);
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

Value Gen::genCall(const Expr &e, llvm::StringRef assignedName) {
  const std::string &f = e.text;
  Location at = loc(e.loc);
  if (auto it = blocks.find(f); it != blocks.end())
    return genBlockCall(*it->second, e, assignedName);
  auto unary = [&](auto create) -> Value {
    if (!checkArgs(e, 1, {"x"}))
      return {};
    const Expr *xe = arg(e, 0, "x", true);
    Value x = xe ? requireF32(*xe, "the input of " + f + "()") : Value();
    return x ? create(x) : Value();
  };
  if (f == "gelu") { // gelu(x, approximate="none" | "tanh"), as F.gelu
    if (!checkArgs(e, 2, {"x", "approximate"}))
      return {};
    const Expr *xe = arg(e, 0, "x", true);
    Value x = xe ? requireF32(*xe, "the input of gelu()") : Value();
    if (!x)
      return {};
    std::string approximate = "none";
    if (const Expr *ae = arg(e, 1, "approximate", false)) {
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
#define DTC_UNARY(NAME, OP)                                                    \
  if (f == NAME)                                                               \
    return unary(                                                              \
        [&](Value x) -> Value { return OP::create(b, at, x.getType(), x); });
  DTC_UNARY("relu", ReluOp)
  DTC_UNARY("tanh", TanhOp)
  DTC_UNARY("sigmoid", SigmoidOp)
  DTC_UNARY("exp", ExpOp)
  DTC_UNARY("log", LogOp)
  DTC_UNARY("neg", NegOp)
  DTC_UNARY("sqrt", SqrtOp)
#undef DTC_UNARY

  static const llvm::StringMap<char> binaries = {
      {"add", '+'}, {"sub", '-'}, {"mul", '*'}, {"div", '/'}, {"matmul", '@'}};
  if (auto it = binaries.find(f); it != binaries.end()) {
    if (!checkArgs(e, 2, {"a", "b"}))
      return {};
    const Expr *ae = arg(e, 0, "a", true), *be = arg(e, 1, "b", true);
    if (!ae || !be)
      return {};
    Value l = requireF32(*ae, "the first argument of " + f + "()");
    Value r =
        l ? requireF32(*be, "the second argument of " + f + "()") : Value();
    return r ? genBinary(it->second, e.loc, l, r) : Value();
  }
  if (f == "linear" || f == "dense")
    return genLinear(e, assignedName);
  if (f == "sum" || f == "mean" || f == "max")
    return genReduce(e, f);
  if (f == "conv2d")
    return genConv2d(e, assignedName);
  if (f == "max_pool2d" || f == "avg_pool2d")
    return genPool2d(e);
  if (f == "adaptive_avg_pool2d")
    return genAdaptiveAvgPool2d(e);
  if (f == "flatten")
    return genFlatten(e);
  if (f == "dropout")
    return genDropout(e);
  if (f == "batch_norm")
    return genBatchNorm(e, assignedName);
  if (f == "layer_norm")
    return genLayerNorm(e, assignedName);
  if (f == "embedding")
    return genEmbedding(e, assignedName);
  if (f == "softmax" || f == "log_softmax") {
    if (!checkArgs(e, 2, {"x", "axis"}))
      return {};
    const Expr *xe = arg(e, 0, "x", true);
    Value x = xe ? requireF32(*xe, "the input of " + f + "()") : Value();
    if (!x)
      return {};
    auto ax = axisOf(e, 1, cast<RankedTensorType>(x.getType()).getRank(), -1);
    if (!ax)
      return {};
    if (f == "softmax")
      return SoftmaxOp::create(b, at, x.getType(), x, *ax);
    return LogSoftmaxOp::create(b, at, x.getType(), x, *ax);
  }
  if (f == "reshape") {
    if (!checkArgs(e, 2, {"x", "shape"}))
      return {};
    const Expr *xe = arg(e, 0, "x", true), *se = arg(e, 1, "shape", true);
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
  if (f == "transpose" || f == "permute")
    return genTranspose(e);
  if (f == "scaled_dot_product_attention")
    return genAttention(e);
  if (f == "arange") { // torch.arange(n): positions, int32 here
    if (!checkArgs(e, 1, {"end"}))
      return {};
    const Expr *ne = arg(e, 0, "end", true);
    auto n = ne ? integer(*ne, "arange's end", 1) : std::nullopt;
    if (!n)
      return {};
    return ArangeOp::create(b, at, RankedTensorType::get({*n}, b.getI32Type()));
  }
  if (f == "concat")
    return genConcat(e);
  if (f == "split") {
    error(e.loc) << "split() gives several values: assign one name to each, "
                    "as in 'q, k, v = split(x, 3, axis=-1)'";
    return {};
  }
  if (f == "cross_entropy" || f == "softmax_cross_entropy" || f == "accuracy") {
    if (!checkArgs(e, 2, {"logits", "labels", "ignore_index"}))
      return {};
    int64_t ignore = -100; // torch's default
    if (const Expr *ig = arg(e, 99, "ignore_index", false)) {
      auto v = integer(*ig, "ignore_index", INT32_MIN);
      if (!v)
        return {};
      ignore = *v;
    }
    const Expr *le = arg(e, 0, "logits", true), *ye = arg(e, 1, "labels", true);
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
  if (f == "mse") {
    if (!checkArgs(e, 2, {"prediction", "target"}))
      return {};
    const Expr *pe = arg(e, 0, "prediction", true),
               *te = arg(e, 1, "target", true);
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
  error(e.loc) << "unknown function '" << f << "'";
  return {};
}

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
    } else if (s.key == "lr") {
      auto x = number(v, "the learning rate");
      if (x && *x <= 0)
        error(v.loc) << "the learning rate must be positive";
      else if (x)
        lrOverride = *x;
    } else {
      error(s.loc) << "unknown train setting '" << s.key
                   << "' (expected data, batch, epochs, optimizer, lr, "
                      "schedule, clip_grad_norm, accumulate, seed, "
                      "validation)";
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
}

//===----------------------------------------------------------------------===//
// The program
//===----------------------------------------------------------------------===//

/// `q, k, v = split(...)`: one name per value.
void Gen::genTuple(const Stmt &s) {
  SmallVector<Value> values;
  if (s.value->kind == Expr::Kind::Call && s.value->text == "split")
    values = genSplit(*s.value, s.names.size());
  else
    error(s.value->loc) << "only split() gives several values; assign "
                           "this to one name";
  for (auto [i, n] : llvm::enumerate(s.names)) {
    if (n.first == "loss") {
      error(n.second) << "'loss' is the objective: assign it alone, "
                         "as in 'loss = ...'";
      values.clear();
    }
    if (values.empty())
      poisoned.insert(n.first);
    else
      declare(n.first, n.second, values[i]);
  }
}

/// `h0 = blk(x, ...)`: the block's statements with its inputs bound to the
/// arguments, in a scope of their own (a block sees its inputs and its own
/// names only), every layer in it named `h0.<its name>`; the value of its
/// return.
Value Gen::genBlockCall(const dsl::Block &blk, const Expr &e,
                        llvm::StringRef assignedName) {
  if (assignedName.empty()) {
    error(e.loc) << "block '" << blk.name
                 << "' must be assigned to a name (the prefix of its "
                    "parameters), as in 'h0 = "
                 << blk.name << "(x)'";
    return {};
  }
  if (llvm::is_contained(active, llvm::StringRef(blk.name))) {
    error(e.loc) << "block '" << blk.name << "' instantiates itself";
    return {};
  }
  std::optional<llvm::StringRef> taken; // the first in order, for the message
  for (const auto &p : paramNames)
    if (p.getKey().starts_with((assignedName + ".").str()) &&
        (!taken || p.getKey() < *taken))
      taken = p.getKey();
  if (taken) {
    error(e.loc) << "'" << assignedName << "' already names parameters ("
                 << *taken
                 << "): every instance of a block needs a name of its own";
    return {};
  }
  SmallVector<llvm::StringRef> inputs;
  for (auto &p : blk.params)
    inputs.push_back(p.first);
  if (!checkArgs(e, inputs.size(), inputs))
    return {};
  SmallVector<Value> args;
  for (auto [i, name] : llvm::enumerate(inputs)) {
    const Expr *a = arg(e, i, name, true);
    Value v = a ? gen(*a) : Value();
    if (!v)
      return {};
    args.push_back(v);
  }
  // The block's own scope.
  auto outerNames = std::move(names);
  auto outerPoisoned = std::move(poisoned);
  std::string outerPrefix = std::move(prefix);
  names = {};
  poisoned = {};
  prefix = assignedName.str();
  active.push_back(blk.name);
  for (auto [i, p] : llvm::enumerate(blk.params))
    declare(p.first, p.second, args[i]);
  for (const Stmt &s : blk.stmts) {
    b.setInsertionPointToEnd(body);
    if (s.kind != Stmt::Kind::Assign) {
      error(s.loc) << "a block holds assignments and its return; inputs, "
                      "labels, parameters, the loss and metrics belong to "
                      "the model";
      continue;
    }
    if (!s.names.empty()) {
      genTuple(s);
      continue;
    }
    Value v = gen(*s.value, prefix + "." + s.name);
    if (v)
      declare(s.name, s.nameLoc, v);
    else
      poisoned.insert(s.name);
  }
  Value result = hadError ? Value() : gen(*blk.result);
  active.pop_back();
  names = std::move(outerNames);
  poisoned = std::move(outerPoisoned);
  prefix = std::move(outerPrefix);
  return result;
}

OwningOpRef<ModuleOp> Gen::run(const Program &p) {
  // Owned here, so that every early return (an error) frees it.
  OwningOpRef<ModuleOp> owned = ModuleOp::create(loc({1, 1}));
  module = *owned;
  std::string name = p.modelName;
  if (name.empty())
    name = llvm::sys::path::stem(filename).str();
  DtcDialect *dialect = ctx->getLoadedDialect<DtcDialect>();
  dialect->getModelAttrHelper().setAttr(module, b.getStringAttr(name));
  dialect->getSourceAttrHelper().setAttr(module, b.getStringAttr(filename));

  for (const dsl::Block &blk : p.blocks)
    blocks[blk.name] = &blk;
  // The signature: the input, then the labels.
  const Stmt *input = nullptr, *label = nullptr;
  for (const Stmt &s : p.stmts) {
    const Stmt **slot = s.kind == Stmt::Kind::Input   ? &input
                        : s.kind == Stmt::Kind::Label ? &label
                                                      : nullptr;
    if (!slot)
      continue;
    if (*slot) {
      error(s.loc) << "a model has one '"
                   << (s.kind == Stmt::Kind::Input ? "input" : "label")
                   << "' (the first is at line " << (*slot)->loc.line << ")";
      return nullptr;
    }
    *slot = &s;
  }
  if (!input || !label) {
    error({1, 1}) << "a model needs an 'input' and a 'label' declaration";
    return nullptr;
  }
  RankedTensorType xt = declaredType(input->type, true);
  RankedTensorType yt = declaredType(label->type, true);
  if (!xt || !yt)
    return nullptr;
  if (xt.getElementType().isInteger(32) && xt.getRank() != 2) {
    error(input->type.loc) << "token ids are i32[" << batchSymbol
                           << ", T]: a sequence of T per sample";
    return nullptr;
  }
  for (auto [s, t] : {std::pair{input, xt}, std::pair{label, yt}})
    if (!shape::isBatched(t)) {
      error(s->type.loc) << "'" << s->name
                         << "' needs a batch dimension first, as in [B, ...]";
      return nullptr;
    }

  inputType = xt;
  b.setInsertionPointToEnd(module.getBody());
  auto func = func::FuncOp::create(b, loc(input->loc), "forward",
                                   b.getFunctionType({xt, yt}, {}));
  body = func.addEntryBlock();
  func.setArgAttr(0, "dtc.name", b.getStringAttr(input->name));
  func.setArgAttr(1, "dtc.name", b.getStringAttr(label->name));
  declare(input->name, input->nameLoc, func.getArgument(0));
  declare(label->name, label->nameLoc, func.getArgument(1));
  b.setInsertionPointToEnd(body);

  Value loss;
  SmallVector<Value> metrics;
  SmallVector<Attribute> outputNames{b.getStringAttr("loss")};
  for (const Stmt &s : p.stmts) {
    b.setInsertionPointToEnd(body);
    switch (s.kind) {
    case Stmt::Kind::Input:
    case Stmt::Kind::Label:
      break;
    case Stmt::Kind::Param:
      if (Value v = paramFromDecl(s))
        declare(s.name, s.nameLoc, v);
      break;
    case Stmt::Kind::Assign:
    case Stmt::Kind::Loss:
    case Stmt::Kind::Metric: {
      if (!s.names.empty()) { // q, k, v = split(...)
        genTuple(s);
        break;
      }
      Value v = gen(*s.value, s.name);
      if (!v) {
        poisoned.insert(s.name);
        break;
      }
      if (s.kind != Stmt::Kind::Assign) {
        auto t = cast<RankedTensorType>(v.getType());
        if (t.getRank() != 0 || t.getElementType() != b.getF32Type()) {
          error(s.value->loc)
              << (s.kind == Stmt::Kind::Loss ? "the loss" : "a metric")
              << " must be a scalar (f32[]), got " << shape::str(t)
              << "; reduce it with mean() or sum()";
          break;
        }
        if (s.kind == Stmt::Kind::Loss) {
          if (loss) {
            error(s.loc) << "the loss is defined twice";
            break;
          }
          loss = v;
        } else {
          if (s.name == "loss") {
            error(s.nameLoc) << "'loss' is reserved for the objective";
            break;
          }
          metrics.push_back(v);
          outputNames.push_back(b.getStringAttr(s.name));
        }
      }
      declare(s.name, s.nameLoc, v);
      break;
    }
    }
  }
  if (!hadError && !loss)
    error({1, 1}) << "no loss: add a statement 'loss = ...'";
  genRecipe(p);
  if (hadError)
    return nullptr;

  b.setInsertionPointToEnd(body);
  SmallVector<Value> results{loss};
  results.append(metrics);
  func::ReturnOp::create(b, loc(input->loc), results);
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  func.setFunctionType(b.getFunctionType({xt, yt}, resultTypes));
  dialect->getOutputsAttrHelper().setAttr(func, b.getArrayAttr(outputNames));
  if (mlir::failed(verify(module)))
    return nullptr;
  return owned;
}

OwningOpRef<ModuleOp> dtc::dsl::buildModule(const Program &program,
                                            llvm::StringRef filename,
                                            MLIRContext *context) {
  context->loadDialect<DtcDialect, func::FuncDialect>();
  Gen gen(context, filename);
  return gen.run(program);
}
