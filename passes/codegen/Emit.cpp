//===- Emit.cpp - Runtime calls (dtcrt) to C++ and CUDA C++ ---------------===//
//
// The printers of the back end. They print the module that
// dtc-lower-to-runtime made and decide nothing: every buffer, size, call
// and its order is in the IR, and, as CIRCT's ExportVerilog, they do not
// change it. The two targets differ in three places only: the namespace of
// the kernels (dtc::kern or dtc::cuda, whose declarations have the same
// parameters), the context `c` each step declares, and how an elementwise
// kernel is launched (a loop nest, or a __global__ kernel and its launch).
// What follows the steps, the ModelSpec the runtime reads, is printed from
// the module's recipe, optimizer and plan.
//
//===----------------------------------------------------------------------===//
#include "passes/codegen/Emit.h"

#include "dialects/dtc/DtcDialect.h"
#include "dialects/dtc/ShapeInference.h"
#include "dialects/dtcrt/DtcrtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "passes/Passes.h"
#include "passes/Steps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace dtc;

std::string dtc::cppStringLiteral(llvm::StringRef s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += (char)c;
    } else if (c >= 0x20 && c < 0x7f && c != '?') {
      out += (char)c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    }
  }
  return out + "\"";
}

namespace {

std::string floatLiteral(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos &&
      s.find("inf") == std::string::npos && s.find("nan") == std::string::npos)
    s += ".0";
  if (s == "inf" || s == "-inf")
    return s[0] == '-' ? "-INFINITY" : "INFINITY";
  return s + "f";
}

/// A double that reads back exactly (a recipe's fraction).
std::string doubleLiteral(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

/// A dimension of a lowered shape (-1 is the batch).
std::string dim(int64_t d) {
  return d < 0 ? std::string("B") : std::to_string(d);
}

/// Product of dims [from, to) as a C++ expression.
std::string product(ArrayRef<int64_t> shape, size_t from, size_t to) {
  std::string s;
  int64_t constant = 1;
  for (size_t i = from; i < to; ++i) {
    if (shape[i] < 0)
      s += "B*";
    else
      constant *= shape[i];
  }
  return s + std::to_string(constant);
}

/// GELU's derivative at x (an expression), the factor of its gradient:
/// Phi(x) + x phi(x). The same text in gelu_grad and gelu_deriv, so that dy
/// times gelu_deriv's value is gelu_grad's float.
std::string geluDeriv(const std::string &x) {
  return "(0.5f * (1.0f + erff(" + x + " * 0.70710678118654752f)) + " + x +
         " * 0.39894228040143268f * expf(-0.5f * " + x + " * " + x + "))";
}

/// The tanh GELU's derivative at x. With s = sigmoid(2 u) = 0.5 (1 +
/// tanh(u)), 1 - tanh(u)^2 = 4 s (1 - s): s + 2 x s (1 - s) sqrt(2 / pi) (1 +
/// 0.134145 x^2); s in a lambda (the expression is one C++ expression). s is
/// the forward's sigmoid (x * (1 / (1 + exp(...)))), which the host compiler
/// computes once where both are in one kernel.
std::string geluTanhDeriv(const std::string &x) {
  return "[](float x) { const float s = 1.0f / (1.0f + "
         "expf(-1.5957691216057308f * (x + 0.044715f * x * x * x))); "
         "return s + x * s * (1.0f - s) * 1.5957691216057308f * (1.0f + "
         "0.134145f * x * x); }(" +
         x + ")";
}

/// The scalar C++ expression of an elementwise op over operand expressions.
std::string scalarExpr(Operation *op, ArrayRef<std::string> x) {
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case([&](AddOp) { return x[0] + " + " + x[1]; })
      .Case([&](SubOp) { return x[0] + " - " + x[1]; })
      .Case([&](MulOp) { return x[0] + " * " + x[1]; })
      .Case([&](DivOp) { return x[0] + " / " + x[1]; })
      .Case([&](NegOp) { return "-" + x[0]; })
      .Case([&](ReluOp) { return x[0] + " > 0.0f ? " + x[0] + " : 0.0f"; })
      .Case([&](TanhOp) { return "tanhf(" + x[0] + ")"; })
      .Case([&](SigmoidOp) { return "1.0f / (1.0f + expf(-" + x[0] + "))"; })
      .Case([&](GeluOp) {
        return "0.5f * " + x[0] + " * (1.0f + erff(" + x[0] +
               " * 0.70710678118654752f))";
      })
      .Case([&](GeluTanhOp) {
        // 0.5 x (1 + tanh(u)) = x sigmoid(2 u), u = sqrt(2 / pi) (x +
        // 0.044715 x^3): one exp instead of a tanh (libmvec's expf is the
        // cheaper; 2 sqrt(2 / pi) = 1.5957691216057308). The sigmoid is
        // geluTanhDeriv's s, written the same, so that a kernel holding both
        // computes one exp and one division.
        return x[0] + " * (1.0f / (1.0f + expf(-1.5957691216057308f * (" +
               x[0] + " + 0.044715f * " + x[0] + " * " + x[0] + " * " + x[0] +
               "))))";
      })
      .Case([&](ExpOp) { return "expf(" + x[0] + ")"; })
      .Case([&](LogOp) { return "logf(" + x[0] + ")"; })
      .Case([&](SqrtOp) { return "sqrtf(" + x[0] + ")"; })
      .Case([&](ReluGradOp) { return x[0] + " > 0.0f ? " + x[1] + " : 0.0f"; })
      .Case([&](GeluGradOp) { return x[1] + " * " + geluDeriv(x[0]); })
      .Case([&](GeluTanhGradOp) { return x[1] + " * " + geluTanhDeriv(x[0]); })
      .Case([&](GeluDerivOp) { return geluDeriv(x[0]); })
      .Case([&](GeluTanhDerivOp) { return geluTanhDeriv(x[0]); })
      .Case<BroadcastToOp, CopyOp>([&](Operation *) { return x[0]; })
      .Default([](Operation *) { return std::string(); });
}

/// How an elementwise kernel reads each input at element (i0, ..., l): the
/// pointer (in<i>, or out<j> for an input that output j overwrites) and the
/// lowered strides as index expressions; `flat` when no input needs the
/// multi-index.
struct Loads {
  bool flat = true;
  std::vector<std::string> from, index;
};

/// For each input, the output written over it (in_place), or -1.
SmallVector<int64_t> overwrittenBy(dtcrt::ElementwiseOp op) {
  SmallVector<int64_t> by(op.getInputs().size(), -1);
  if (std::optional<ArrayRef<int64_t>> inPlace = op.getInPlace())
    for (auto [j, i] : llvm::enumerate(*inPlace))
      if (i >= 0)
        by[size_t(i)] = int64_t(j);
  return by;
}

Loads loadsOf(dtcrt::ElementwiseOp op) {
  Loads loads;
  SmallVector<int64_t> by = overwrittenBy(op);
  for (auto [i, a] : llvm::enumerate(op.getStrides())) {
    loads.from.push_back(by[i] >= 0 ? "out" + std::to_string(by[i])
                                    : "in" + std::to_string(i));
    auto strides = cast<DenseI64ArrayAttr>(a).asArrayRef();
    if (strides.empty()) {
      loads.index.push_back("l");
      continue;
    }
    std::string idx;
    for (auto [k, s] : llvm::enumerate(strides))
      if (s)
        idx = (idx.empty() ? "" : idx + " + ") + "i" + std::to_string(k) +
              (s == 1 ? "" : " * " + std::to_string(s));
    if (!idx.empty())
      loads.flat = false;
    loads.index.push_back(idx.empty() ? "0" : idx);
  }
  return loads;
}

/// The body of an elementwise kernel at element `l`: loads, one scalar per
/// op, stores; the same text for the CPU loop nest and the CUDA kernel.
LogicalResult kernelBody(dtcrt::ElementwiseOp op, const Loads &loads,
                         StringRef indent, llvm::raw_ostream &os) {
  DenseMap<Value, std::string> scalars;
  Block &body = op.getBody().front();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    std::string n = "x" + std::to_string(i);
    os << indent << "const float " << n << " = " << loads.from[i] << "["
       << loads.index[i] << "];\n";
    scalars[arg] = n;
  }
  unsigned e = 0;
  for (Operation &inner : body.without_terminator()) {
    std::string expr;
    if (auto c = dyn_cast<ConstantOp>(inner)) {
      expr = floatLiteral(c.getValue().convertToDouble());
    } else if (isa<BatchSizeOp>(inner)) {
      expr = "static_cast<float>(B)";
    } else {
      SmallVector<std::string> xs;
      for (Value v : inner.getOperands())
        xs.push_back(scalars.lookup(v));
      expr = scalarExpr(&inner, xs);
      if (expr.empty())
        return inner.emitError("the printers have no scalar form of '")
               << inner.getName() << "'";
    }
    std::string n = "e" + std::to_string(e++);
    os << indent << "const float " << n << " = " << expr << ";\n";
    scalars[inner.getResult(0)] = n;
  }
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return op.emitError("an elementwise kernel's body ends with dtc.yield");
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    os << indent << "out" << i << "[l] = " << scalars.lookup(v) << ";\n";
  return success();
}

class Printer {
public:
  Printer(ModuleOp module, Target target, llvm::raw_ostream &os)
      : module(module), target(target), os(os), out(&os),
        dtc(module->getContext()->getLoadedDialect<DtcDialect>()) {}

  LogicalResult printStep(func::FuncOp f, StringRef name);
  /// The kernels the steps launch, each once (CPU loop functions or CUDA
  /// __global__ kernels).
  std::string kernels;

private:
  LogicalResult printOp(Operation *op);
  LogicalResult printElementwise(dtcrt::ElementwiseOp op);
  std::string e(Value v) { return exprs.lookup(v); }
  std::string fresh(StringRef prefix) {
    return prefix.str() + std::to_string(counter++);
  }
  StringRef ns() const {
    return target == Target::Cpu ? "dtc::kern" : "dtc::cuda";
  }

  /// The values a part of a step uses: their own (a buffer, an array) and
  /// those their expressions name (an offset's base), in definition order.
  void uses(Value v, SmallVectorImpl<Value> &named);

  ModuleOp module;
  Target target;
  llvm::raw_ostream &os;  // the program
  llvm::raw_ostream *out; // the op being printed: its part of the step
  DtcDialect *dtc;
  DenseMap<Value, std::string> exprs;
  /// A named value's declaration (a buffer's pointer, an array) and the part
  /// of the step that printed it: a later part declares it again.
  DenseMap<Value, std::pair<std::string, unsigned>> decls;
  unsigned counter = 0;
  llvm::StringMap<std::string> kernelNames; // kernel text -> its name
  unsigned kernelCount = 0;
};

// A step prints as one function, or, past kCallsPerPart calls, as a
// function that calls its parts in order, each a function of at least
// that many calls (cut after a call where no all-reduce is pending, its
// request a local of the part that started it, and no trace span is open).
// The same calls in the same order; the
// host compiler's time grows with a function's size faster than linearly
// (GCC's points-to analysis: a 2,000-op elementwise chain in one function
// did not compile in 300 s), and with the number of parts linearly. A part
// declares again the buffers and arrays of earlier parts it uses (their
// offsets are the plan's: the same pointers).
constexpr unsigned kCallsPerPart = 64;

void Printer::uses(Value v, SmallVectorImpl<Value> &named) {
  if (llvm::is_contained(named, v))
    return;
  Operation *def = v.getDefiningOp();
  if (auto o = dyn_cast_or_null<dtcrt::OffsetOp>(def))
    return uses(o.getBase(), named);
  if (auto u = dyn_cast_or_null<dtcrt::UpdateItemsOp>(def))
    for (Value x : u->getOperands())
      uses(x, named);
  if (decls.count(v))
    named.push_back(v);
}

LogicalResult Printer::printStep(func::FuncOp f, StringRef name) {
  exprs.clear();
  decls.clear();
  ArenaAttr arena = dtc->getArenaAttrHelper().getAttr(f);
  if (!arena || !f->hasAttr("dtcrt.step_type") || f.getNumArguments())
    return f.emitError("the printers need steps lowered to runtime calls "
                       "(run dtc-lower-to-runtime)");
  // The fixed region first, so that its buffers (gradients, buckets) stay put
  // whatever the batch size; the per-sample region after it.
  std::string prologue;
  llvm::raw_string_ostream(prologue)
      << "  const int64_t B = a.batch;\n"
      << "  char *const P = a.persistent;\n"
      << "  char *const F = a.arena;\n"
      << "  char *const S = a.arena + " << arena.getFixed() << ";\n"
      << (target == Target::Cpu
              ? "  const dtc::rt::HostContext c{};\n"
              : "  const dtc::rt::DeviceContext &c = *a.device;\n")
      << "  (void)B; (void)P; (void)F; (void)S; (void)c;\n";
  SmallVector<std::string> parts(1);
  unsigned calls = 0, pending = 0, traced = 0;
  for (Operation &op : f.front()) {
    unsigned part = parts.size() - 1;
    // The earlier parts' buffers and arrays this op reads, declared again.
    SmallVector<Value> named;
    for (Value v : op.getOperands())
      uses(v, named);
    std::string text;
    llvm::raw_string_ostream opText(text);
    for (Value v : named) {
      auto &[decl, in] = decls[v];
      if (in != part) {
        opText << decl;
        in = part;
      }
    }
    size_t start = text.size();
    out = &opText;
    LogicalResult printed = printOp(&op);
    out = &os;
    if (failed(printed))
      return failure();
    if (isa<dtcrt::BufferOp, dtcrt::ArrayOp, dtcrt::UpdateItemsOp>(op) &&
        exprs.count(op.getResult(0)) && text.size() > start)
      decls[op.getResult(0)] = {text.substr(start), part};
    parts.back() += text;
    if (isa<dtcrt::AllreduceStartOp>(op))
      ++pending;
    else if (isa<dtcrt::AllreduceWaitOp>(op) && pending)
      --pending;
    else if (isa<dtcrt::TraceBeginOp>(op))
      ++traced;
    else if (isa<dtcrt::TraceEndOp>(op) && traced)
      --traced;
    if (op.hasTrait<dtcrt::OpTrait::KernelCall>() ||
        isa<dtcrt::ElementwiseOp, dtcrt::AllreduceStartOp>(op))
      ++calls;
    if (calls >= kCallsPerPart && pending == 0 && traced == 0 &&
        !isa<func::ReturnOp>(op)) {
      parts.emplace_back();
      calls = 0;
    }
  }
  if (parts.size() > 1 && parts.back().empty())
    parts.pop_back();
  if (parts.size() == 1) {
    os << "static void " << name << "(const dtc::rt::StepArgs &a) {\n"
       << prologue << parts[0] << "}\n\n";
    return success();
  }
  for (auto [i, text] : llvm::enumerate(parts))
    os << "__attribute__((noinline)) static void " << name << "Part" << i
       << "(const dtc::rt::StepArgs &a) {\n"
       << prologue << text << "}\n\n";
  os << "static void " << name << "(const dtc::rt::StepArgs &a) {\n";
  for (size_t i = 0; i < parts.size(); ++i)
    os << "  " << name << "Part" << i << "(a);\n";
  os << "}\n\n";
  return success();
}

LogicalResult Printer::printOp(Operation *op) {
  if (op->hasTrait<dtcrt::OpTrait::KernelCall>()) {
    *out << "  " << ns() << "::" << dtcrt::calleeOf(op) << "(c";
    for (Value v : op->getOperands())
      *out << ", " << e(v);
    *out << ");\n";
    return success();
  }
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](dtcrt::BufferOp b) {
        std::string n = fresh("v");
        exprs[b] = n;
        int64_t off = b.getOffset();
        Type element = cast<dtcrt::PtrType>(b.getType()).getElement();
        const char *type = element.isInteger(64)   ? "int64_t"
                           : element.isInteger(32) ? "int32_t"
                                                   : "float";
        *out << "  " << type << " *" << n << " = reinterpret_cast<" << type
             << " *>("
             << (b.getSpace() == dtcrt::Space::Persistent
                     ? "P + " + std::to_string(off)
                 : b.getSpace() == dtcrt::Space::Fixed
                     ? "F + " + std::to_string(off)
                     : "S + " + std::to_string(off) + " * B")
             << ");\n";
        return success();
      })
      .Case([&](dtcrt::StepArgOp s) {
        switch (s.getArg()) {
        case dtcrt::StepArg::Input:
          exprs[s] = "const_cast<float *>(a.x)";
          break;
        case dtcrt::StepArg::InputIds:
          exprs[s] = "const_cast<int32_t *>(a.xIds)";
          break;
        case dtcrt::StepArg::ClassLabels:
          exprs[s] = "a.yClass";
          break;
        case dtcrt::StepArg::ValueLabels:
          exprs[s] = "const_cast<float *>(a.yValue)";
          break;
        case dtcrt::StepArg::Outputs:
          exprs[s] = "a.outputs";
          break;
        case dtcrt::StepArg::ParamGrads:
          exprs[s] = "a.paramGrads";
          break;
        case dtcrt::StepArg::Predictions:
          exprs[s] = "a.predictions";
          break;
        }
        return success();
      })
      .Case([&](dtcrt::OffsetOp o) {
        exprs[o] =
            "(" + e(o.getBase()) + " + " + std::to_string(o.getCount()) + ")";
        return success();
      })
      .Case([&](dtcrt::NullOp z) {
        exprs[z] = "nullptr";
        return success();
      })
      .Case([&](dtcrt::SizeOp s) {
        std::string n = std::to_string(s.getElements());
        exprs[s] = s.getBatched() ? (s.getElements() == 1 ? "B" : "B*" + n) : n;
        return success();
      })
      .Case([&](dtcrt::ConstantOp k) {
        Attribute v = k.getValue();
        if (auto f = dyn_cast<FloatAttr>(v))
          exprs[k] = floatLiteral(f.getValueAsDouble());
        else if (k.getType().isInteger(1))
          exprs[k] =
              cast<IntegerAttr>(v).getValue().isZero() ? "false" : "true";
        else
          exprs[k] = std::to_string(cast<IntegerAttr>(v).getInt());
        return success();
      })
      .Case([&](dtcrt::StepScalarOp s) {
        switch (s.getScalar()) {
        case dtcrt::StepScalar::Batch:
          exprs[s] = "static_cast<float>(B)";
          break;
        case dtcrt::StepScalar::GradSeed:
          exprs[s] = "a.gradSeed";
          break;
        case dtcrt::StepScalar::MomentumShare:
          exprs[s] = "dtc::rt::momentumShare(*a.hyper, a.comm->size())";
          break;
        }
        return success();
      })
      .Case([&](dtcrt::StepSeedOp s) {
        exprs[s] = "a.rngSeed";
        return success();
      })
      .Case([&](dtcrt::HyperOp h) {
        exprs[h] = "*a.hyper";
        return success();
      })
      .Case([&](dtcrt::ArrayOp a) {
        if (a.getValues().empty()) {
          exprs[a] = "nullptr";
          return success();
        }
        bool i64 =
            cast<dtcrt::ArrayType>(a.getType()).getElement().isInteger(64);
        std::string n = fresh(i64 ? "s" : "p");
        exprs[a] = n;
        *out << "  const " << (i64 ? "int64_t " : "int32_t ") << n << "[] = {";
        for (auto [i, v] : llvm::enumerate(a.getValues()))
          *out << (i ? ", " : "") << (i64 ? dim(v) : std::to_string(v));
        *out << "};\n";
        return success();
      })
      .Case([&](dtcrt::UpdateItemsOp u) {
        std::string n = fresh("u");
        exprs[u] = n;
        int64_t per = u.getStatesPerItem();
        *out << "  const dtc::rt::UpdateItem " << n << "[] = {\n";
        for (size_t i = 0; i < u.getWeights().size(); ++i) {
          auto state = [&](int64_t s) {
            return s < per ? e(u.getStates()[i * per + s])
                           : std::string("nullptr");
          };
          *out << "      {" << e(u.getWeights()[i]) << ", "
               << e(u.getGrads()[i]) << ", " << state(0) << ", " << state(1)
               << ", " << e(u.getSizes()[i]) << "},\n";
        }
        *out << "  };\n";
        return success();
      })
      .Case([&](dtcrt::ElementwiseOp k) { return printElementwise(k); })
      .Case([&](dtcrt::AllreduceStartOp s) {
        std::string r = fresh("r");
        exprs[s.getRequest()] = r;
        *out << "  const dtc::rt::Request " << r << " = a.comm->allreduceStart("
             << s.getBucket() << ", " << e(s.getBuf()) << ", "
             << e(s.getCount()) << ");\n";
        return success();
      })
      .Case([&](dtcrt::AllreduceWaitOp w) {
        *out << "  a.comm->wait(" << e(w.getRequest()) << ");\n";
        return success();
      })
      .Case([&](dtcrt::TraceBeginOp t) {
        *out << "  if (a.trace) dtc::rt::traceBegin(a.trace, "
             << cppStringLiteral(t.getName()) << ");\n";
        return success();
      })
      .Case([&](dtcrt::TraceEndOp) {
        *out << "  if (a.trace) dtc::rt::traceEnd(a.trace);\n";
        return success();
      })
      .Case([&](func::ReturnOp) { return success(); })
      .Default([&](Operation *o) {
        return o->emitError("the printers cannot print '")
               << o->getName() << "'; run dtc-lower-to-runtime first";
      });
}

LogicalResult Printer::printElementwise(dtcrt::ElementwiseOp op) {
  ArrayRef<int64_t> shape = op.getShape();
  size_t rank = shape.size();
  Loads loads = loadsOf(op);
  SmallVector<std::string> params, args;
  SmallVector<int64_t> by = overwrittenBy(op);
  for (auto [i, v] : llvm::enumerate(op.getInputs())) {
    if (by[i] >= 0)
      continue; // read through the output written over it
    params.push_back("const float *__restrict__ in" + std::to_string(i));
    args.push_back(e(v));
  }
  for (auto [i, v] : llvm::enumerate(op.getOutputs())) {
    params.push_back("float *__restrict__ out" + std::to_string(i));
    args.push_back(e(v));
  }
  // The kernel's text, under a placeholder name: identical kernels (the
  // forward of the three steps, layers of the same shape) are printed once,
  // so the host compiler's time grows with the model linearly.
  std::string text;
  llvm::raw_string_ostream k(text);
  // The multi-index a broadcast load needs, from the linear index `from`
  // over dimensions [0, end) (the others' indices are not printed).
  auto printIndices = [&](StringRef from, int64_t end, StringRef indent) {
    auto used = [&](int64_t d) {
      return llvm::any_of(op.getStrides(), [&](Attribute a) {
        auto s = cast<DenseI64ArrayAttr>(a).asArrayRef();
        return !s.empty() && s[d] != 0;
      });
    };
    int64_t lowest = end;
    for (int64_t d = 0; d < end; ++d)
      if (used(d)) {
        lowest = d;
        break;
      }
    if (lowest < end)
      k << indent << "int64_t r = " << from << ";\n";
    for (int64_t d = end - 1; d >= lowest; --d) {
      if (d == 0) {
        k << indent << "const int64_t i0 = r;\n";
        break;
      }
      if (used(d))
        k << indent << "const int64_t i" << d << " = r % " << dim(shape[d])
          << ";\n";
      if (d > lowest)
        k << indent << "r /= " << dim(shape[d]) << ";\n";
    }
  };
  bool flat = loads.flat || rank == 0;
  // The CPU kernel runs over [lo, hi) of its units, which the call splits
  // over the --threads cores (dtc::kern::forRanges): elements when its
  // loads are flat, else rows (every dimension but the last; the elements
  // of a rank-1 shape).
  std::string units =
      flat || rank == 1 ? product(shape, 0, rank) : product(shape, 0, rank - 1);
  std::string unitElements =
      flat || rank == 1 ? "1" : product(shape, rank - 1, rank);
  k << "(int64_t B";
  if (target == Target::Cpu)
    k << ", int64_t lo, int64_t hi";
  for (auto &p : params)
    k << ", " << p;
  k << ") {\n  (void)B;\n";
  if (target == Target::Cpu) {
    std::string indent = "    ";
    if (flat) {
      k << "  for (int64_t l = lo; l < hi; ++l) {\n";
    } else if (rank == 1) {
      k << "  for (int64_t i0 = lo; i0 < hi; ++i0) {\n"
        << "    const int64_t l = i0;\n";
    } else {
      const std::string last = "i" + std::to_string(rank - 1);
      k << "  for (int64_t row = lo; row < hi; ++row) {\n";
      printIndices("row", rank - 1, "    ");
      k << "    for (int64_t " << last << " = 0; " << last << " < "
        << dim(shape[rank - 1]) << "; ++" << last << ") {\n"
        << "      const int64_t l = row * " << dim(shape[rank - 1]) << " + "
        << last << ";\n";
      indent = "      ";
    }
    if (failed(kernelBody(op, loads, indent, k)))
      return failure();
    if (!flat && rank > 1)
      k << "    }\n";
    k << "  }\n}\n\n";
  } else {
    k << "  const int64_t n = " << product(shape, 0, rank) << ";\n"
      << "  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; "
         "l < n; l += int64_t(gridDim.x) * blockDim.x) {\n";
    if (!loads.flat && rank > 0)
      printIndices("l", rank, "    "); // last dimension fastest
    if (failed(kernelBody(op, loads, "    ", k)))
      return failure();
    k << "  }\n}\n\n";
  }
  std::string &kname = kernelNames[text];
  if (kname.empty()) {
    bool cpu = target == Target::Cpu;
    kname = (cpu ? "fused" : "fusedKernel") + std::to_string(kernelCount++);
    kernels += "// fused(" + op.getLabel().str() + ")\n" +
               (cpu ? "static void " : "__global__ void ") + kname + text;
  }
  if (target == Target::Cpu) {
    *out << "  dtc::kern::forRanges(c, " << units << ", " << unitElements
         << ", [&](int64_t lo, int64_t hi) { " << kname << "(B, lo, hi";
    for (auto &a : args)
      *out << ", " << a;
    *out << "); });\n";
    return success();
  }
  // The launch shape is the runtime's (dtc/cuda.h), as its own kernels'.
  *out << "  " << kname << "<<<dtc::cuda::gridFor(" << e(op.getCount())
       << "), dtc::cuda::kThreads, 0, c.stream>>>(B";
  for (auto &a : args)
    *out << ", " << a;
  *out << ");\n";
  if (target == Target::Cuda)
    *out << "  dtc::cuda::launched(\"" << kname << "\");\n";
  return success();
}

//===----------------------------------------------------------------------===//
// The ModelSpec
//===----------------------------------------------------------------------===//

/// A lowered i64 operand's value (a dtcrt.constant or dtcrt.size).
int64_t constantOf(Value v) {
  if (auto c = v.getDefiningOp<dtcrt::ConstantOp>())
    return cast<IntegerAttr>(c.getValue()).getInt();
  if (auto s = v.getDefiningOp<dtcrt::SizeOp>())
    return s.getElements();
  return 0;
}

void printSpec(ModuleOp module, llvm::raw_ostream &os, uint64_t fingerprint) {
  DtcDialect *dtc = module->getContext()->getLoadedDialect<DtcDialect>();
  RecipeAttr recipe = dtc->getRecipeAttrHelper().getAttr(module);
  OptimizerAttr opt = optimizerOf(module);
  PersistentAttr persistent = dtc->getPersistentAttrHelper().getAttr(module);
  auto str = [&](StringAttr a) {
    return a ? a.getValue().str() : std::string();
  };
  auto eval = module.lookupSymbol<func::FuncOp>(steps::kEval);
  auto train = module.lookupSymbol<func::FuncOp>(steps::kTrain);

  // Parameters.
  auto init = [](InitKind k) {
    switch (k) {
    case InitKind::Zeros:
      return "Zeros";
    case InitKind::Constant:
      return "Constant";
    case InitKind::Uniform:
      return "Uniform";
    case InitKind::Normal:
      return "Normal";
    case InitKind::GlorotUniform:
      return "GlorotUniform";
    case InitKind::GlorotNormal:
      return "GlorotNormal";
    case InitKind::HeUniform:
      return "HeUniform";
    case InitKind::HeNormal:
      return "HeNormal";
    }
    llvm_unreachable("an initializer");
  };
  SmallVector<ParamOp> params(module.getOps<ParamOp>());
  llvm::StringMap<int32_t> index;
  os << "static const dtc::rt::ParamSpec kParams[] = {\n";
  for (ParamOp p : params) {
    index[p.getSymName()] = index.size();
    auto t = cast<RankedTensorType>(p.getType());
    auto s = t.getShape();
    int64_t fanOut = s.empty() ? 1 : s.back();
    int64_t fanIn =
        s.empty() ? 1 : t.getNumElements() / std::max<int64_t>(fanOut, 1);
    if (s.size() == 1)
      fanIn = s[0];
    PlacementAttr at = dtc->getPlacementAttrHelper().getAttr(p);
    os << "    {" << cppStringLiteral(p.getSymName()) << ", " << s.size()
       << ", {";
    for (size_t i = 0; i < 6; ++i)
      os << (i ? ", " : "") << (i < s.size() ? s[i] : 0);
    os << "}, " << t.getNumElements() << ", " << at.getOffset()
       << ", dtc::rt::InitKind::" << init(p.getInit()) << ", "
       << llvm::format("%.17g", p.getA().convertToDouble()) << ", "
       << llvm::format("%.17g", p.getB().convertToDouble()) << ", " << fanIn
       << ", " << fanOut << ", " << at.getStateOffset().value_or(0) << "},\n";
  }
  if (params.empty())
    os << "    {\"\", 0, {0, 0, 0, 0, 0, 0}, 0, 0, dtc::rt::InitKind::Zeros, "
          "0, 0, 0, 0, 0},\n";
  os << "};\n\n";

  // The buffers (non-trainable state), after the parameters.
  SmallVector<BufferOp> buffers(module.getOps<BufferOp>());
  os << "static const dtc::rt::BufferSpec kBuffers[] = {\n";
  for (BufferOp buf : buffers) {
    auto t = cast<RankedTensorType>(buf.getType());
    auto s = t.getShape();
    os << "    {" << cppStringLiteral(buf.getSymName())
       << ", dtc::rt::ElementType::"
       << (t.getElementType().isInteger(64) ? "I64" : "F32") << ", " << s.size()
       << ", {";
    for (size_t i = 0; i < 6; ++i)
      os << (i ? ", " : "") << (i < s.size() ? s[i] : 0);
    os << "}, " << t.getNumElements() << ", "
       << dtc->getPlacementAttrHelper().getAttr(buf).getOffset() << ", "
       << llvm::format("%.17g", buf.getValue().convertToDouble()) << "},\n";
  }
  if (buffers.empty())
    os << "    {\"\", dtc::rt::ElementType::F32, 0, {0, 0, 0, 0, 0, 0}, 0, 0, "
          "0},\n";
  os << "};\n\n";

  // The bucket plan, in the order the buckets' all-reduces start.
  SmallVector<dtcrt::AllreduceStartOp> buckets;
  train.walk([&](dtcrt::AllreduceStartOp s) {
    if (s.getBucket() >= 0)
      buckets.push_back(s);
  });
  for (auto [i, s] : llvm::enumerate(buckets)) {
    os << "static const int32_t kBucket" << i << "Params[] = {";
    for (auto [j, p] : llvm::enumerate(s->getAttrOfType<ArrayAttr>("params")))
      os << (j ? ", " : "")
         << index.lookup(cast<FlatSymbolRefAttr>(p).getValue());
    os << "};\n";
  }
  os << "static const dtc::rt::BucketSpec kBuckets[] = {\n";
  for (auto [i, s] : llvm::enumerate(buckets))
    os << "    {" << s.getBucket() << ", " << constantOf(s.getCount()) << ", "
       << s->getAttrOfType<ArrayAttr>("params").size() << ", kBucket" << i
       << "Params},\n";
  if (buckets.empty())
    os << "    {0, 0, 0, nullptr},\n";
  os << "};\n\n";

  ArrayAttr outputs = dtc->getOutputsAttrHelper().getAttr(eval);
  // What --predict reads: the rows @eval_step exports (0: none).
  int64_t predictWidth = 0;
  eval.walk([&](dtcrt::ExportPredictionOp e) {
    if (auto n = e.getN().getDefiningOp<dtcrt::SizeOp>())
      predictWidth = n.getElements();
  });
  os << "static const char *const kOutputNames[] = {";
  for (auto [i, n] : llvm::enumerate(outputs))
    os << (i ? ", " : "") << cppStringLiteral(cast<StringAttr>(n).getValue());
  os << "};\n\n";

  auto stepType = cast<FunctionType>(
      eval->getAttrOfType<TypeAttr>("dtcrt.step_type").getValue());
  auto xt = cast<RankedTensorType>(stepType.getInput(0));
  auto yt = cast<RankedTensorType>(stepType.getInput(1));
  bool classes = yt.getElementType().isInteger(32);
  int64_t numClasses = 0, ignoreIndex = -100, idLimit = 0;
  eval.walk([&](Operation *op) {
    if (auto c = dyn_cast<dtcrt::CrossEntropyOp>(op)) {
      numClasses = constantOf(c.getClasses());
      ignoreIndex = constantOf(c.getIgnoreIndex());
    }
    if (auto c = dyn_cast<dtcrt::AccuracyOp>(op)) {
      numClasses = constantOf(c.getClasses());
      ignoreIndex = constantOf(c.getIgnoreIndex());
    }
    // The rows of the smallest table the input's ids index.
    if (auto e = dyn_cast<dtcrt::EmbeddingOp>(op)) {
      auto arg = e.getIds().getDefiningOp<dtcrt::StepArgOp>();
      if (arg && arg.getArg() == dtcrt::StepArg::InputIds) {
        const int64_t num = constantOf(e.getNum());
        idLimit = idLimit ? std::min(idLimit, num) : num;
      }
    }
  });
  int64_t perSample = 0, fixed = 0;
  for (auto f : module.getOps<func::FuncOp>()) {
    ArenaAttr arena = dtc->getArenaAttrHelper().getAttr(f);
    perSample = std::max(perSample, arena.getPerSample());
    fixed = std::max(fixed, arena.getFixed());
  }
  const char *dataKind = recipe.getData() == DataKind::IDX         ? "IDX"
                         : recipe.getData() == DataKind::CSV       ? "CSV"
                         : recipe.getData() == DataKind::Synthetic ? "Synthetic"
                         : recipe.getData() == DataKind::Text      ? "Text"
                                                                   : "None";
  OptimizerKind optKind = opt.getKind();
  os << "static dtc::rt::ModelSpec makeSpec() {\n"
     << "  dtc::rt::ModelSpec s{};\n"
     << "  s.name = "
     << cppStringLiteral(str(dtc->getModelAttrHelper().getAttr(module)))
     << ";\n"
     << "  s.source = "
     << cppStringLiteral(str(dtc->getSourceAttrHelper().getAttr(module)))
     << ";\n"
     << "  s.inputRank = " << xt.getRank() - 1 << ";\n";
  for (int64_t i = 1; i < xt.getRank(); ++i)
    os << "  s.inputShape[" << i - 1 << "] = " << xt.getDimSize(i) << ";\n";
  os << "  s.inputNumel = " << shape::numElementsPerBatch(xt) << ";\n"
     << "  s.inputType = dtc::rt::ElementType::"
     << (xt.getElementType().isInteger(32) ? "I32" : "F32") << ";\n"
     << "  s.inputIdLimit = " << idLimit << ";\n"
     << "  s.ignoreIndex = " << ignoreIndex << ";\n"
     << "  s.labelKind = dtc::rt::LabelKind::" << (classes ? "Class" : "Value")
     << ";\n"
     << "  s.labelNumel = " << shape::numElementsPerBatch(yt) << ";\n"
     << "  s.numClasses = " << numClasses << ";\n"
     << "  s.numParams = " << params.size() << ";\n"
     << "  s.params = kParams;\n"
     << "  s.persistentBytes = " << persistent.getBytes() << ";\n"
     << "  s.paramBytes = " << persistent.getParamBytes() << ";\n"
     << "  s.numBuffers = " << buffers.size() << ";\n"
     << "  s.buffers = kBuffers;\n"
     << "  s.bufferBytes = " << persistent.getBufferBytes() << ";\n"
     << "  s.numStates = " << opt.numStateBuffers() << ";\n"
     << "  s.arenaPerSample = " << perSample << ";\n"
     << "  s.arenaFixed = " << fixed + 64
     << "; // + alignment of the fixed region\n"
     << "  s.numOutputs = " << outputs.size() << ";\n"
     << "  s.predictWidth = " << predictWidth << ";\n"
     << "  s.outputNames = kOutputNames;\n"
     << "  s.trainStep = trainStep;\n"
     << "  s.evalStep = evalStep;\n"
     << "  s.gradStep = gradStep;\n"
     << "  s.accumulateStep = "
     << (module.lookupSymbol(steps::kAccumulate) ? "accumulateStep" : "nullptr")
     << ";\n"
     << "  s.recipe.data.kind = dtc::rt::DatasetKind::" << dataKind << ";\n"
     << "  s.recipe.data.dir = " << cppStringLiteral(recipe.getDir()) << ";\n"
     << "  s.recipe.data.trainPath = " << cppStringLiteral(recipe.getTrain())
     << ";\n"
     << "  s.recipe.data.testPath = " << cppStringLiteral(recipe.getTest())
     << ";\n"
     << "  s.recipe.data.trainSize = " << recipe.getTrainSize() << ";\n"
     << "  s.recipe.data.testSize = " << recipe.getTestSize() << ";\n"
     << "  s.recipe.batch = " << recipe.getBatch() << ";\n"
     << "  s.recipe.epochs = " << recipe.getEpochs() << ";\n"
     << "  s.recipe.seed = " << recipe.getSeed() << "ULL;\n"
     << "  s.recipe.validation = " << doubleLiteral(recipe.getValidation())
     << ";\n"
     << "  s.recipe.optimizer = dtc::rt::OptimizerKind::"
     << (optKind == OptimizerKind::Adam    ? "Adam"
         : optKind == OptimizerKind::AdamW ? "AdamW"
                                           : "SGD")
     << ";\n";
  for (auto [field, value] :
       {std::pair<const char *, double>{"lr", opt.getLr()},
        {"momentum", opt.getMomentum()},
        {"dampening", opt.getDampening()},
        {"weightDecay", opt.getWeightDecay()},
        {"beta1", opt.getBeta1()},
        {"beta2", opt.getBeta2()},
        {"eps", opt.getEps()}})
    os << "  s.recipe.hyper." << field << " = " << floatLiteral(value) << ";\n";
  if (auto sched = dtc->getScheduleAttrHelper().getAttr(module))
    os << "  s.recipe.schedule.kind = " << int(sched.getKind()) << ";\n"
       << "  s.recipe.schedule.warmup = " << sched.getWarmup() << ";\n"
       << "  s.recipe.schedule.decaySteps = " << sched.getDecaySteps() << ";\n"
       << "  s.recipe.schedule.minLr = " << doubleLiteral(sched.getMinLr())
       << ";\n"
       << "  s.recipe.schedule.stepSize = " << sched.getStepSize() << ";\n"
       << "  s.recipe.schedule.gamma = " << doubleLiteral(sched.getGamma())
       << ";\n";
  auto accumulate = dtc->getAccumulateAttrHelper().getAttr(module);
  os << "  s.recipe.accumulate = " << (accumulate ? accumulate.getInt() : 1)
     << ";\n";
  if (auto clip = dtc->getClipGradNormAttrHelper().getAttr(module))
    os << "  s.recipe.hyper.maxGradNorm = "
       << floatLiteral(clip.getValueAsDouble()) << ";\n";
  os << "  s.recipe.hyper.nesterov = " << (opt.getNesterov() ? 1 : 0) << ";\n"
     << "  s.recipe.hyper.step = 0;\n"
     << "  s.fingerprint = 0x" << llvm::format_hex_no_prefix(fingerprint, 16)
     << "ULL;\n"
     << "  s.numBuckets = " << buckets.size() << ";\n"
     << "  s.buckets = kBuckets;\n"
     << "  return s;\n}\n\n";
}

LogicalResult print(ModuleOp module, Target programTarget,
                    llvm::raw_ostream &os) {
  auto eval = module.lookupSymbol<func::FuncOp>(steps::kEval);
  auto train = module.lookupSymbol<func::FuncOp>(steps::kTrain);
  auto grad = module.lookupSymbol<func::FuncOp>(steps::kGrad);
  auto accumulate = module.lookupSymbol<func::FuncOp>(steps::kAccumulate);
  if (!eval || !train || !grad)
    return module.emitError(
        "the printers need @train_step, @grad_step and @eval_step "
        "lowered to runtime calls (run dtc-lower-to-runtime)");
  bool cuda = programTarget == Target::Cuda;
  os << "// Generated by dtc. Do not edit: recompile the model instead.\n"
     << "#include \"dtc/kernels.h\"\n"
     << "#include \"dtc/runtime.h\"\n"
     << "#include \"dtc/comm.h\"\n"
     << "#include \"dtc/trace.h\"\n";
  if (cuda)
    os << "#include \"dtc/cuda.h\"\n#include <cuda_runtime.h>\n";
  else // SIMD erff, expf, ... for the fused loops (glibc's libmvec)
    os << "#include \"dtc/vector_math.h\"\n";
  os << "#include <cmath>\n#include <cstdint>\n#include <cstring>\n\n"
     << "namespace {\n\n";
  // The steps go to a buffer first: their text (with the bucket plan in it)
  // is the program's fingerprint, which ranks compare before training. A
  // CUDA program holds the CPU steps too: train picks the device at run time.
  std::string steps;
  {
    llvm::raw_string_ostream stepsStream(steps);
    std::string cpuSteps;
    llvm::raw_string_ostream cpuStream(cpuSteps);
    Printer cpu(module, Target::Cpu, cpuStream);
    if (failed(cpu.printStep(eval, "evalStep")) ||
        failed(cpu.printStep(train, "trainStep")) ||
        failed(cpu.printStep(grad, "gradStep")) ||
        (accumulate && failed(cpu.printStep(accumulate, "accumulateStep"))))
      return failure();
    stepsStream << "// Fused elementwise kernels.\n" << cpu.kernels << cpuSteps;
    if (cuda) {
      std::string cudaSteps;
      llvm::raw_string_ostream cudaStream(cudaSteps);
      Printer dev(module, Target::Cuda, cudaStream);
      if (failed(dev.printStep(eval, "evalStepCuda")) ||
          failed(dev.printStep(train, "trainStepCuda")) ||
          failed(dev.printStep(grad, "gradStepCuda")) ||
          (accumulate &&
           failed(dev.printStep(accumulate, "accumulateStepCuda"))))
        return failure();
      stepsStream << "// CUDA kernels of the fused elementwise ops.\n"
                  << dev.kernels << cudaSteps;
    }
  }
  os << steps;
  uint64_t fingerprint = 0xcbf29ce484222325ULL; // FNV-1a
  for (unsigned char c : steps)
    fingerprint = (fingerprint ^ c) * 0x100000001b3ULL;
  printSpec(module, os, fingerprint);
  if (cuda)
    os << "static dtc::rt::ModelSpec makeSpecWithCuda() {\n"
       << "  dtc::rt::ModelSpec s = makeSpec();\n"
       << "  s.trainStepCuda = trainStepCuda;\n"
       << "  s.evalStepCuda = evalStepCuda;\n"
       << "  s.gradStepCuda = gradStepCuda;\n"
       << "  s.accumulateStepCuda = "
       << (accumulate ? "accumulateStepCuda" : "nullptr") << ";\n"
       << "  return s;\n}\n\n";
  os << "} // namespace\n\n"
     << "int main(int argc, char **argv) {\n"
     << "  return dtc::rt::runMain(argc, argv, "
     << (cuda ? "makeSpecWithCuda" : "makeSpec") << "());\n}\n";
  return success();
}

} // namespace

LogicalResult dtc::emitCpp(ModuleOp module, llvm::raw_ostream &os) {
  return print(module, Target::Cpu, os);
}

LogicalResult dtc::emitCuda(ModuleOp module, llvm::raw_ostream &os) {
  return print(module, Target::Cuda, os);
}
