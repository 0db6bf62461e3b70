//===- MLIRGen.cpp - From the syntax tree to the dtc dialect: the core ----===//
//
// The expression core of the front end (Gen.h): declarations and names,
// operators, the builtins' argument helpers, blocks, and the program.
// The builtin functions are in Builtins.cpp, the recipe in Recipe.cpp.
//
//===----------------------------------------------------------------------===//
#include "frontends/dsl/MLIRGen.h"
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

std::optional<int64_t> Gen::axisOf(const Expr &call, int64_t rank) {
  // The default is the registry's: an axis, or none (required where it is
  // asked for).
  const Builtin *builtin = findBuiltin(call.text);
  int i = builtin ? builtin->index("axis") : -1;
  const char *text = i >= 0 ? builtin->params[size_t(i)].dflt : nullptr;
  int64_t value = 0;
  std::optional<int64_t> dflt;
  if (text && !llvm::StringRef(text).getAsInteger(10, value))
    dflt = value;
  const Expr *a = arg(call, "axis", !dflt);
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
  // The ops the instance adds, marked with its name (dtc.block: the
  // innermost instance's dotted path), for the passes that act on block
  // instances (dtc-rematerialize).
  Operation *before = body->empty() ? nullptr : &body->back();
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
  auto *dialect = ctx->getLoadedDialect<DtcDialect>();
  for (Operation &op : llvm::make_range(
           before ? std::next(before->getIterator()) : body->begin(),
           body->end()))
    if (!dialect->getBlockAttrHelper().getAttr(&op) && !isa<ParamRefOp>(op))
      dialect->getBlockAttrHelper().setAttr(&op, b.getStringAttr(prefix));
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
  setModelDigest();
  return owned;
}

/// The model and its recipe as the IR states them, but for how they are
/// trained in parallel (dtc.shard) and the file's name: a training state
/// written by a program of this digest may be resumed by any other of it,
/// whatever its sharding, world size or plan (docs/runtime.md).
void Gen::setModelDigest() {
  DtcDialect *dialect = ctx->getLoadedDialect<DtcDialect>();
  ShardAttr shard = dialect->getShardAttrHelper().getAttr(module);
  StringAttr source = dialect->getSourceAttrHelper().getAttr(module);
  dialect->getShardAttrHelper().removeAttr(module);
  dialect->getSourceAttrHelper().removeAttr(module);
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, OpPrintingFlags().enableDebugInfo(false));
  uint64_t digest = 0xcbf29ce484222325ULL; // FNV-1a
  for (unsigned char c : text)
    digest = (digest ^ c) * 0x100000001b3ULL;
  if (shard)
    dialect->getShardAttrHelper().setAttr(module, shard);
  dialect->getSourceAttrHelper().setAttr(module, source);
  dialect->getModelDigestAttrHelper().setAttr(
      module, b.getI64IntegerAttr(int64_t(digest)));
}

OwningOpRef<ModuleOp> dtc::dsl::buildModule(const Program &program,
                                            llvm::StringRef filename,
                                            MLIRContext *context) {
  context->loadDialect<DtcDialect, func::FuncDialect>();
  Gen gen(context, filename);
  return gen.run(program);
}
