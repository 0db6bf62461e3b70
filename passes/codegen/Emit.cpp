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
#include "dialects/dtcrt/DtcrtDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
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

/// SiLU's derivative at x: s (1 + x (1 - s)), s = sigmoid(x) (in a lambda:
/// one C++ expression).
std::string siluDeriv(const std::string &x) {
  return "[](float x) { const float s = 1.0f / (1.0f + expf(-x)); return s * "
         "(1.0f + x * (1.0f - s)); }(" +
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
      .Case([&](SiluOp) { return x[0] + " / (1.0f + expf(-" + x[0] + "))"; })
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
      .Case([&](SiluGradOp) { return x[1] + " * " + siluDeriv(x[0]); })
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
  Printer(ModuleOp module, dtcrt::Target target, llvm::raw_ostream &os)
      : module(module), target(target), os(os), out(&os) {}

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
    return target == dtcrt::Target::Cpu ? "dtc::kern" : "dtc::cuda";
  }

  /// The values a part of a step uses: their own (a buffer, an array) and
  /// those their expressions name (an offset's base), in definition order.
  void uses(Value v, SmallVectorImpl<Value> &named);

  ModuleOp module;
  dtcrt::Target target;
  llvm::raw_ostream &os;  // the program
  llvm::raw_ostream *out; // the op being printed: its part of the step
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
  if (auto o = dyn_cast_or_null<dtcrt::RankOffsetOp>(def))
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
  IntegerAttr fixed = module->getContext()
                          ->getLoadedDialect<dtcrt::DtcrtDialect>()
                          ->getFixedBytesAttrHelper()
                          .getAttr(f);
  if (!fixed || f.getNumArguments())
    return f.emitError("the printers need steps lowered to runtime calls "
                       "(run dtc-lower-to-runtime)");
  // The fixed region first, so that its buffers (gradients, buckets) stay put
  // whatever the batch size; the per-sample region after it.
  std::string prologue;
  llvm::raw_string_ostream(prologue)
      << "  const int64_t B = a.batch;\n"
      << "  char *const P = a.persistent;\n"
      << "  char *const F = a.arena;\n"
      << "  char *const S = a.arena + " << fixed.getInt() << ";\n"
      << (target == dtcrt::Target::Cpu
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
    if (isa<dtcrt::AllreduceStartOp, dtcrt::ReduceScatterStartOp,
            dtcrt::AllgatherStartOp>(op))
      ++pending;
    else if (isa<dtcrt::WaitOp, dtcrt::CarryOp>(op) && pending)
      --pending;
    else if (isa<dtcrt::TraceBeginOp>(op))
      ++traced;
    else if (isa<dtcrt::TraceEndOp>(op) && traced)
      --traced;
    if (op.hasTrait<dtcrt::OpTrait::KernelCall>() ||
        isa<dtcrt::ElementwiseOp, dtcrt::AllreduceStartOp,
            dtcrt::ReduceScatterStartOp, dtcrt::AllgatherStartOp>(op))
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
      .Case([&](dtcrt::RankOffsetOp o) {
        exprs[o] = "(" + e(o.getBase()) + " + int64_t(a.comm->rank()) * " +
                   std::to_string(o.getShard()) + ")";
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
      .Case([&](dtcrt::ReduceScatterStartOp s) {
        std::string r = fresh("r");
        exprs[s.getRequest()] = r;
        *out << "  const dtc::rt::Request " << r
             << " = a.comm->reduceScatterStart(" << s.getBucket() << ", "
             << e(s.getBuf()) << ", " << e(s.getShard()) << ", "
             << e(s.getShardCount()) << ");\n";
        return success();
      })
      .Case([&](dtcrt::AllgatherStartOp s) {
        std::string r = fresh("r");
        exprs[s.getRequest()] = r;
        *out << "  const dtc::rt::Request " << r << " = a.comm->allgatherStart("
             << s.getBucket() << ", " << e(s.getBuf()) << ", "
             << e(s.getShardCount()) << ");\n";
        return success();
      })
      .Case([&](dtcrt::WaitOp w) {
        *out << "  a.comm->wait(" << e(w.getRequest()) << ");\n";
        return success();
      })
      .Case([&](dtcrt::CarryOp c) {
        *out << "  a.carried[" << c.getSlot() << "] = " << e(c.getRequest())
             << ";\n";
        return success();
      })
      .Case([&](dtcrt::WaitCarriedOp w) {
        const std::string slot =
            "a.carried[" + std::to_string(w.getSlot()) + "]";
        *out << "  if (const dtc::rt::Request r = " << slot << ") {\n    "
             << slot << " = dtc::rt::Request();\n    a.comm->wait(r);\n  }\n";
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
  if (target == dtcrt::Target::Cpu)
    k << ", int64_t lo, int64_t hi";
  for (auto &p : params)
    k << ", " << p;
  k << ") {\n  (void)B;\n";
  if (target == dtcrt::Target::Cpu) {
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
    bool cpu = target == dtcrt::Target::Cpu;
    kname = (cpu ? "fused" : "fusedKernel") + std::to_string(kernelCount++);
    kernels += "// fused(" + op.getLabel().str() + ")\n" +
               (cpu ? "static void " : "__global__ void ") + kname + text;
  }
  if (target == dtcrt::Target::Cpu) {
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
  if (target == dtcrt::Target::Cuda)
    *out << "  dtc::cuda::launched(\"" << kname << "\");\n";
  return success();
}

//===----------------------------------------------------------------------===//
// The ModelSpec
//===----------------------------------------------------------------------===//

/// The shape fields of a ParamSpec or BufferSpec: rank, {6 dims}.
void printShape(llvm::raw_ostream &os, ArrayRef<int64_t> s) {
  os << s.size() << ", {";
  for (size_t i = 0; i < 6; ++i)
    os << (i ? ", " : "") << (i < s.size() ? s[i] : 0);
  os << "}";
}

int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The program's dtc::rt::ModelSpec: its dtcrt.spec, field by field.
void printSpec(dtcrt::SpecOp spec, bool hasAccumulate, llvm::raw_ostream &os,
               uint64_t fingerprint) {
  auto f64 = [](FloatAttr a) { return a.getValueAsDouble(); };
  os << "static const dtc::rt::ParamSpec kParams[] = {\n";
  for (Attribute a : spec.getParams()) {
    auto p = cast<dtcrt::ParamSpecAttr>(a);
    os << "    {" << cppStringLiteral(p.getName()) << ", ";
    printShape(os, p.getShape().asArrayRef());
    os << ", " << numElements(p.getShape().asArrayRef()) << ", "
       << p.getOffset()
       << ", dtc::rt::InitKind::" << dtcrt::stringifyInitKind(p.getInit())
       << ", " << llvm::format("%.17g", f64(p.getA())) << ", "
       << llvm::format("%.17g", f64(p.getB())) << ", " << p.getFanIn() << ", "
       << p.getFanOut() << ", " << p.getStateOffset() << "},\n";
  }
  if (spec.getParams().empty())
    os << "    {\"\", 0, {0, 0, 0, 0, 0, 0}, 0, 0, dtc::rt::InitKind::Zeros, "
          "0, 0, 0, 0, 0},\n";
  os << "};\n\n";

  // The buffers (non-trainable state), after the parameters.
  os << "static const dtc::rt::BufferSpec kBuffers[] = {\n";
  for (Attribute a : spec.getBuffers()) {
    auto buf = cast<dtcrt::BufferSpecAttr>(a);
    os << "    {" << cppStringLiteral(buf.getName())
       << ", dtc::rt::ElementType::"
       << dtcrt::stringifyElementType(buf.getType()) << ", ";
    printShape(os, buf.getShape().asArrayRef());
    os << ", " << numElements(buf.getShape().asArrayRef()) << ", "
       << buf.getOffset() << ", " << llvm::format("%.17g", f64(buf.getValue()))
       << "},\n";
  }
  if (spec.getBuffers().empty())
    os << "    {\"\", dtc::rt::ElementType::F32, 0, {0, 0, 0, 0, 0, 0}, 0, 0, "
          "0},\n";
  os << "};\n\n";

  // The bucket plan, in the order the buckets' all-reduces start.
  auto buckets = spec.getBuckets().getAsRange<dtcrt::BucketSpecAttr>();
  for (auto [i, b] : llvm::enumerate(buckets)) {
    os << "static const int32_t kBucket" << i << "Params[] = {";
    for (auto [j, p] : llvm::enumerate(b.getParams().asArrayRef()))
      os << (j ? ", " : "") << p;
    os << "};\n";
    if (b.getShard()) {
      os << "static const int64_t kBucket" << i << "Within[] = {";
      for (auto [j, w] : llvm::enumerate(b.getWithin().asArrayRef()))
        os << (j ? ", " : "") << w;
      os << "};\n";
    }
  }
  os << "static const dtc::rt::BucketSpec kBuckets[] = {\n";
  for (auto [i, b] : llvm::enumerate(buckets)) {
    os << "    {" << b.getId() << ", " << b.getCount() << ", "
       << b.getParams().size() << ", kBucket" << i << "Params";
    if (b.getShard())
      os << ", " << *b.getShard() << ", " << b.getParamOffset() << ", "
         << b.getStateOffset() << ", kBucket" << i << "Within";
    os << "},\n";
  }
  if (spec.getBuckets().empty())
    os << "    {0, 0, 0, nullptr},\n";
  os << "};\n\n";

  os << "static const char *const kOutputNames[] = {";
  for (auto [i, n] : llvm::enumerate(spec.getOutputs()))
    os << (i ? ", " : "") << cppStringLiteral(cast<StringAttr>(n).getValue());
  os << "};\n\n";

  dtcrt::InputAttr input = spec.getInput();
  dtcrt::LabelsAttr labels = spec.getLabels();
  dtcrt::MemoryAttr memory = spec.getMemory();
  dtcrt::RecipeAttr recipe = spec.getRecipe();
  dtcrt::HyperAttr hyper = spec.getHyper();
  os << "static dtc::rt::ModelSpec makeSpec() {\n"
     << "  dtc::rt::ModelSpec s{};\n"
     << "  s.name = " << cppStringLiteral(spec.getName()) << ";\n"
     << "  s.source = " << cppStringLiteral(spec.getSource()) << ";\n"
     << "  s.inputRank = " << input.getShape().size() << ";\n";
  for (auto [i, d] : llvm::enumerate(input.getShape().asArrayRef()))
    os << "  s.inputShape[" << i << "] = " << d << ";\n";
  os << "  s.inputNumel = " << input.getNumel() << ";\n"
     << "  s.inputType = dtc::rt::ElementType::"
     << dtcrt::stringifyElementType(input.getType()) << ";\n"
     << "  s.inputIdLimit = " << input.getIdLimit() << ";\n"
     << "  s.ignoreIndex = " << labels.getIgnoreIndex() << ";\n"
     << "  s.labelKind = dtc::rt::LabelKind::"
     << dtcrt::stringifyLabelKind(labels.getKind()) << ";\n"
     << "  s.labelNumel = " << labels.getNumel() << ";\n"
     << "  s.numClasses = " << labels.getClasses() << ";\n"
     << "  s.numParams = " << spec.getParams().size() << ";\n"
     << "  s.params = kParams;\n"
     << "  s.persistentBytes = " << memory.getPersistent() << ";\n"
     << "  s.paramBytes = " << memory.getParams() << ";\n"
     << "  s.numBuffers = " << spec.getBuffers().size() << ";\n"
     << "  s.buffers = kBuffers;\n"
     << "  s.bufferBytes = " << memory.getBuffers() << ";\n"
     << "  s.numStates = " << memory.getStates() << ";\n"
     << "  s.arenaPerSample = " << memory.getPerSample() << ";\n"
     << "  s.arenaFixed = " << memory.getFixed()
     << "; // + alignment of the fixed region\n"
     << "  s.gradArenaPerSample = " << memory.getGradPerSample() << ";\n"
     << "  s.gradArenaFixed = " << memory.getGradFixed() << ";\n"
     << "  s.numOutputs = " << spec.getOutputs().size() << ";\n"
     << "  s.predictWidth = " << spec.getPredictWidth() << ";\n"
     << "  s.outputNames = kOutputNames;\n"
     << "  s.trainStep = trainStep;\n"
     << "  s.evalStep = evalStep;\n"
     << "  s.gradStep = gradStep;\n"
     << "  s.accumulateStep = "
     << (hasAccumulate ? "accumulateStep" : "nullptr") << ";\n"
     << "  s.recipe.data.kind = dtc::rt::DatasetKind::"
     << dtcrt::stringifyDatasetKind(recipe.getData()) << ";\n"
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
     << "  s.recipe.validation = " << doubleLiteral(f64(recipe.getValidation()))
     << ";\n"
     << "  s.recipe.optimizer = dtc::rt::OptimizerKind::"
     << dtcrt::stringifyOptimizerKind(hyper.getOptimizer()) << ";\n";
  for (auto [field, value] :
       {std::pair<const char *, FloatAttr>{"lr", hyper.getLr()},
        {"momentum", hyper.getMomentum()},
        {"dampening", hyper.getDampening()},
        {"weightDecay", hyper.getWeightDecay()},
        {"beta1", hyper.getBeta1()},
        {"beta2", hyper.getBeta2()},
        {"eps", hyper.getEps()}})
    os << "  s.recipe.hyper." << field << " = " << floatLiteral(f64(value))
       << ";\n";
  if (dtcrt::ScheduleAttr sched = spec.getScheduleAttr())
    os << "  s.recipe.schedule.kind = " << int(sched.getKind()) << ";\n"
       << "  s.recipe.schedule.warmup = " << sched.getWarmup() << ";\n"
       << "  s.recipe.schedule.decaySteps = " << sched.getDecaySteps() << ";\n"
       << "  s.recipe.schedule.minLr = " << doubleLiteral(f64(sched.getMinLr()))
       << ";\n"
       << "  s.recipe.schedule.stepSize = " << sched.getStepSize() << ";\n"
       << "  s.recipe.schedule.gamma = " << doubleLiteral(f64(sched.getGamma()))
       << ";\n";
  os << "  s.recipe.accumulate = " << recipe.getAccumulate() << ";\n";
  if (FloatAttr clip = hyper.getMaxGradNorm())
    os << "  s.recipe.hyper.maxGradNorm = " << floatLiteral(f64(clip)) << ";\n";
  os << "  s.recipe.hyper.nesterov = " << (hyper.getNesterov() ? 1 : 0) << ";\n"
     << "  s.recipe.hyper.step = 0;\n"
     << "  s.fingerprint = 0x" << llvm::format_hex_no_prefix(fingerprint, 16)
     << "ULL;\n"
     << "  s.numBuckets = " << spec.getBuckets().size() << ";\n"
     << "  s.buckets = kBuckets;\n";
  if (IntegerAttr digest = spec.getModelDigestAttr())
    os << "  s.modelDigest = 0x"
       << llvm::format_hex_no_prefix(uint64_t(digest.getInt()), 16) << "ULL;\n";
  if (dtcrt::ShardAttr shard = spec.getShardAttr())
    os << "  s.shardStage = " << shard.getStage() << ";\n"
       << "  s.shardRanks = " << shard.getRanks() << ";\n";
  if (dtcrt::PredictionAttr p = spec.getPredictionAttr())
    os << "  s.prediction.stepSeconds = "
       << doubleLiteral(f64(p.getStepSeconds())) << ";\n"
       << "  s.prediction.peakBytes = " << p.getPeakBytes() << ";\n"
       << "  s.prediction.ranks = " << p.getRanks() << ";\n"
       << "  s.prediction.batch = " << p.getBatch() << ";\n"
       << "  s.prediction.budget = " << p.getBudget() << ";\n"
       << "  s.prediction.computeSeconds = "
       << doubleLiteral(f64(p.getComputeSeconds())) << ";\n"
       << "  s.prediction.referenceSeconds = "
       << doubleLiteral(f64(p.getReferenceSeconds())) << ";\n";
  os << "  return s;\n}\n\n";
}

} // namespace

dtcrt::SpecOp dtc::specOf(ModuleOp module) {
  auto specs = module.getOps<dtcrt::SpecOp>();
  if (specs.empty() || std::next(specs.begin()) != specs.end())
    return {};
  return *specs.begin();
}

LogicalResult dtc::emitSource(ModuleOp module, llvm::raw_ostream &os) {
  dtcrt::SpecOp spec = specOf(module);
  auto eval = module.lookupSymbol<func::FuncOp>(steps::kEval);
  auto train = module.lookupSymbol<func::FuncOp>(steps::kTrain);
  auto grad = module.lookupSymbol<func::FuncOp>(steps::kGrad);
  auto accumulate = module.lookupSymbol<func::FuncOp>(steps::kAccumulate);
  if (!spec || !eval || !train || !grad)
    return module.emitError(
        "the printers need one dtcrt.spec and @train_step, @grad_step and "
        "@eval_step lowered to runtime calls (run dtc-lower-to-runtime)");
  bool cuda = spec.getTarget() == dtcrt::Target::Cuda;
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
    Printer cpu(module, dtcrt::Target::Cpu, cpuStream);
    if (failed(cpu.printStep(eval, "evalStep")) ||
        failed(cpu.printStep(train, "trainStep")) ||
        failed(cpu.printStep(grad, "gradStep")) ||
        (accumulate && failed(cpu.printStep(accumulate, "accumulateStep"))))
      return failure();
    stepsStream << "// Fused elementwise kernels.\n" << cpu.kernels << cpuSteps;
    if (cuda) {
      std::string cudaSteps;
      llvm::raw_string_ostream cudaStream(cudaSteps);
      Printer dev(module, dtcrt::Target::Cuda, cudaStream);
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
  printSpec(spec, bool(accumulate), os, fingerprint);
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
