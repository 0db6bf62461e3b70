//===- Emit.cpp - Planned dtc IR to C++ (CPU) and CUDA C++ (GPU) ---------===//
//
// The last step of the pipeline, the only one that differs between targets.
// One emitter walks the planned IR; per op it prints either a CPU statement
// (a GEMM through the runtime's engine, a fused loop nest, a call into dtc/kernels.h) or a CUDA one
// (cuBLAS GEMM, a launch of a generated fused __global__ kernel, a call into
// dtc/cuda.h). Buffers, their offsets and the order of everything come from
// the IR, identically for both.
//
//===----------------------------------------------------------------------===//
#include "passes/codegen/Emit.h"

#include "dialects/dtc/DtcDialect.h"
#include "dialects/dtc/ShapeInference.h"
#include "passes/Passes.h"
#include "passes/Steps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
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

std::string dim(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("B") : std::to_string(d);
}

/// Product of dims [from, to) as a C++ expression.
std::string product(ArrayRef<int64_t> shape, size_t from, size_t to) {
  std::string s;
  int64_t constant = 1;
  for (size_t i = from; i < to; ++i) {
    if (ShapedType::isDynamic(shape[i]))
      s += "B*";
    else
      constant *= shape[i];
  }
  return s + std::to_string(constant);
}

std::string numel(Type t) {
  auto s = cast<RankedTensorType>(t).getShape();
  return product(s, 0, s.size());
}

enum class Target { Cpu, Cuda };

/// Ops that compute (and so appear in --trace timelines).
bool isTraced(Operation *op) {
  return !isa<ParamRefOp, ReshapeOp, ConstantOp, BatchSizeOp, GradSeedOp,
              func::ReturnOp,
              AllReduceOp, AllReduceBucketOp, AllReduceStartOp,
              AllReduceWaitOp>(op);
}

/// "matmul", "fused(add,relu)", "update fc1.weight".
std::string traceName(Operation *op) {
  if (auto u = dyn_cast<ApplyGradientOp>(op))
    return "update " + u.getParam().str();
  std::string n = op->getName().stripDialect().str();
  if (auto f = dyn_cast<FusedOp>(op)) {
    n += "(";
    bool first = true;
    for (Operation &inner : f.getBody().front().without_terminator()) {
      if (isa<ConstantOp, BatchSizeOp>(inner))
        continue;
      n += (first ? "" : ",") + inner.getName().stripDialect().str();
      first = false;
    }
    n += ")";
  }
  return n;
}

class Emitter {
public:
  Emitter(ModuleOp module, llvm::raw_ostream &os)
      : module(module), os(os),
        dialect(module->getContext()->getLoadedDialect<DtcDialect>()) {}
  LogicalResult emit(Target programTarget);

private:
  LogicalResult emitFunction(func::FuncOp f, llvm::StringRef name);
  LogicalResult emitOp(Operation *op);
  LogicalResult emitOpCuda(Operation *op);
  /// A fused kernel's parameter names (inputs, then outputs), their C++
  /// declarations, and the step's arguments for them (defining the outputs).
  struct KernelSignature {
    SmallVector<std::string> ins, outs, params, args;
  };
  KernelSignature kernelSignature(FusedOp op);
  void emitFused(FusedOp op);
  void emitFusedCuda(FusedOp op);
  /// One kernel launch for a run of consecutive updates (CUDA).
  void emitUpdatesCuda(ArrayRef<ApplyGradientOp> updates);
  std::string updateItem(ApplyGradientOp u);
  void emitSpec(func::FuncOp forward, uint64_t fingerprint);
  LogicalResult emitUpdate(ApplyGradientOp u);
  void emitExport(ExportGradientOp e);
  void emitOutputs(func::ReturnOp r);
  bool outputsWritten = false;
  /// Declares the result `r` of `op` at its planned place in the arena.
  std::string define(Value r, Operation *op, unsigned index);
  std::string shapeArray(Type t);
  /// [outer, n, inner] of a reduction over `axis`.
  std::string axisView(Type t, int64_t axis);
  std::string name(Value v) { return names.lookup(v); }
  PlacementAttr placement(StringRef param) {
    return dialect->getPlacementAttrHelper().getAttr(paramInfo(param).op);
  }
  /// A parameter by name: its op and index. Built once: lookups stay O(1).
  struct ParamInfo {
    ParamOp op;
    int32_t index;
  };
  const ParamInfo &paramInfo(StringRef name) {
    if (paramTable.empty()) {
      int32_t index = 0;
      for (ParamOp p : module.getOps<ParamOp>())
        paramTable[p.getSymName()] = {p, index++};
    }
    return paramTable.find(name)->second;
  }
  llvm::StringMap<ParamInfo> paramTable;

  ModuleOp module;
  llvm::raw_ostream &os;
  DtcDialect *dialect;
  DenseMap<Value, std::string> names;
  unsigned counter = 0;
  Target target = Target::Cpu;       // of the step being emitted
  std::string kernels;               // generated __global__ kernels (CUDA)
  unsigned kernelCount = 0;
  llvm::StringMap<std::string> kernelNames; // kernel text -> its name
  DenseSet<Operation *> emittedUpdates; // updates already batched (CUDA)
  // trainStep on the CPU with dtc.fold_momentum: each bucketed gradient's
  // momentum buffer (byte offset in P), the parameters so updated, and the
  // gradients whose GEMM accumulated into their buffer itself.
  DenseMap<Value, int64_t> foldSlot;
  llvm::StringSet<> foldedParams;
  DenseSet<Value> foldedInPlace;
};

std::string Emitter::define(Value r, Operation *op, unsigned index) {
  auto offsets = dialect->getOffsetsAttrHelper().getAttr(op);
  auto t = cast<RankedTensorType>(r.getType());
  std::string n = "v" + std::to_string(counter++);
  names[r] = n;
  int64_t off = offsets[index];
  os << "  float *" << n << " = reinterpret_cast<float *>("
     << (shape::isBatched(t) ? "S + " + std::to_string(off) + " * B"
                             : "F + " + std::to_string(off))
     << ");\n";
  return n;
}

std::string Emitter::shapeArray(Type t) {
  auto s = cast<RankedTensorType>(t).getShape();
  if (s.empty())
    return "nullptr";
  std::string n = "s" + std::to_string(counter++);
  os << "  const int64_t " << n << "[] = {";
  for (auto [i, d] : llvm::enumerate(s))
    os << (i ? ", " : "") << dim(d);
  os << "};\n";
  return n;
}

std::string Emitter::axisView(Type t, int64_t axis) {
  auto s = cast<RankedTensorType>(t).getShape();
  return product(s, 0, axis) + ", " + dim(s[axis]) + ", " +
         product(s, axis + 1, s.size());
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
      .Case([&](SigmoidOp) {
        return "1.0f / (1.0f + expf(-" + x[0] + "))";
      })
      .Case([&](GeluOp) {
        return "0.5f * " + x[0] + " * (1.0f + erff(" + x[0] +
               " * 0.70710678118654752f))";
      })
      .Case([&](ExpOp) { return "expf(" + x[0] + ")"; })
      .Case([&](LogOp) { return "logf(" + x[0] + ")"; })
      .Case([&](SqrtOp) { return "sqrtf(" + x[0] + ")"; })
      .Case([&](ReluGradOp) {
        return x[0] + " > 0.0f ? " + x[1] + " : 0.0f";
      })
      .Case([&](GeluGradOp) {
        return x[1] + " * (0.5f * (1.0f + erff(" + x[0] +
               " * 0.70710678118654752f)) + " + x[0] +
               " * 0.39894228040143268f * expf(-0.5f * " + x[0] + " * " +
               x[0] + "))";
      })
      .Case<BroadcastToOp, CopyOp>([&](Operation *) { return x[0]; })
      .Default([](Operation *) { return std::string(); });
}

/// How a fused kernel reads each input at output element (i0, ..., l): an
/// input of the output's shape at the linear index `l`, a 0-d one at 0, a
/// broadcast one through its own strides (0 along broadcast dimensions). The
/// batch dimension, when present, is the first, so no stride involves B.
struct FusedLoads {
  bool flat; // every input is read at `l` or at 0: no multi-index needed
  std::vector<std::string> index;
};

FusedLoads fusedLoads(FusedOp op) {
  auto outType = cast<RankedTensorType>(op.getResult(0).getType());
  size_t rank = outType.getRank();
  FusedLoads loads{true, {}};
  for (Value v : op.getInputs()) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t == outType) {
      loads.index.push_back("l");
      continue;
    }
    if (t.getRank() == 0) {
      loads.index.push_back("0");
      continue;
    }
    loads.flat = false;
    auto in = t.getShape();
    std::string idx;
    int64_t stride = 1;
    for (int64_t j = in.size() - 1; j >= 0; --j) {
      size_t k = j + (rank - in.size());
      if (in[j] != 1)
        idx = (idx.empty() ? "" : idx + " + ") + "i" + std::to_string(k) +
              (stride == 1 ? "" : " * " + std::to_string(stride));
      stride *= ShapedType::isDynamic(in[j]) ? 1 : in[j];
    }
    loads.index.push_back(idx.empty() ? "0" : idx);
  }
  return loads;
}

/// The body of a fused kernel at element `l`: loads, one scalar per op,
/// stores; the same text for the CPU loop nest and the CUDA kernel.
void fusedBody(FusedOp op, const FusedLoads &loads, ArrayRef<std::string> ins,
               ArrayRef<std::string> outs, StringRef indent,
               llvm::raw_ostream &os) {
  DenseMap<Value, std::string> scalars;
  Block &body = op.getBody().front();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    std::string n = "x" + std::to_string(i);
    os << indent << "const float " << n << " = " << ins[i] << "["
       << loads.index[i] << "];\n";
    scalars[arg] = n;
  }
  unsigned e = 0;
  for (Operation &inner : body.without_terminator()) {
    std::string expr;
    if (auto c = dyn_cast<ConstantOp>(inner))
      expr = floatLiteral(c.getValue().convertToDouble());
    else if (isa<BatchSizeOp>(inner))
      expr = "static_cast<float>(B)";
    else {
      SmallVector<std::string> xs;
      for (Value v : inner.getOperands())
        xs.push_back(scalars.lookup(v));
      expr = scalarExpr(&inner, xs);
    }
    std::string n = "e" + std::to_string(e++);
    os << indent << "const float " << n << " = " << expr << ";\n";
    scalars[inner.getResult(0)] = n;
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    os << indent << outs[i] << "[l] = " << scalars.lookup(v) << ";\n";
}

Emitter::KernelSignature Emitter::kernelSignature(FusedOp op) {
  KernelSignature k;
  for (auto [i, v] : llvm::enumerate(op.getInputs())) {
    k.ins.push_back("in" + std::to_string(i));
    k.params.push_back("const float *__restrict__ in" + std::to_string(i));
    k.args.push_back(name(v));
  }
  for (auto [i, r] : llvm::enumerate(op.getResults())) {
    k.outs.push_back("out" + std::to_string(i));
    k.params.push_back("float *__restrict__ out" + std::to_string(i));
    k.args.push_back(define(r, op, i));
  }
  return k;
}

void Emitter::emitFused(FusedOp op) {
  // Each fused kernel is a function of its own, emitted once however many
  // steps (or layers of the same shape) use it: the steps stay short, so the
  // host compiler's time grows with the model linearly.
  auto outType = cast<RankedTensorType>(op.getResult(0).getType());
  auto shape = outType.getShape();
  size_t rank = shape.size();
  auto [ins, outs, params, args] = kernelSignature(op);
  FusedLoads loads = fusedLoads(op);
  bool flat = loads.flat || rank == 0;
  std::string text;
  llvm::raw_string_ostream k(text);
  k << "(int64_t B";
  for (auto &p : params)
    k << ", " << p;
  k << ") {\n  (void)B;\n";
  std::string indent = "  ";
  if (flat) {
    k << indent << "for (int64_t l = 0; l < " << numel(outType) << "; ++l) {\n";
    indent += "  ";
  } else {
    for (size_t d = 0; d < rank; ++d) {
      k << indent << "for (int64_t i" << d << " = 0; i" << d << " < "
        << dim(shape[d]) << "; ++i" << d << ") {\n";
      indent += "  ";
    }
    k << indent << "const int64_t l = ";
    for (size_t d = 0; d < rank; ++d) {
      k << (d ? " + " : "") << "i" << d;
      std::string rest = product(shape, d + 1, rank);
      if (rest != "1")
        k << " * " << rest;
    }
    k << ";\n";
  }
  fusedBody(op, loads, ins, outs, indent, k);
  size_t loops = flat ? 1 : rank;
  for (size_t d = 0; d < loops; ++d) {
    indent.resize(indent.size() - 2);
    k << indent << "}\n";
  }
  k << "}\n\n";
  std::string &kname = kernelNames[text];
  if (kname.empty()) {
    kname = "fused" + std::to_string(kernelCount++);
    kernels += "// " + traceName(op) + "\nstatic void " + kname + text;
  }
  os << "  " << kname << "(B";
  for (auto &a : args)
    os << ", " << a;
  os << ");\n";
}

void Emitter::emitFusedCuda(FusedOp op) {
  auto outType = cast<RankedTensorType>(op.getResult(0).getType());
  auto shape = outType.getShape();
  size_t rank = shape.size();
  auto [ins, outs, params, args] = kernelSignature(op);
  FusedLoads loads = fusedLoads(op);
  // The kernel's text, under a placeholder name: identical kernels (the
  // forward of the eval, train and grad steps) are emitted once.
  std::string text;
  llvm::raw_string_ostream k(text);
  k << "(int64_t B";
  for (auto &p : params)
    k << ", " << p;
  k << ") {\n"
    << "  (void)B;\n"
    << "  const int64_t n = " << numel(outType) << ";\n"
    << "  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; "
       "l < n; l += int64_t(gridDim.x) * blockDim.x) {\n";
  if (!loads.flat && rank > 0) {
    // The multi-index of l, last dimension fastest; only the indices that
    // some broadcast load uses.
    auto used = [&](int64_t d) {
      std::string var = "i" + std::to_string(d);
      return llvm::any_of(loads.index, [&](const std::string &idx) {
        for (size_t p = idx.find(var); p != std::string::npos;
             p = idx.find(var, p + 1))
          if (p + var.size() == idx.size() || !isdigit(idx[p + var.size()]))
            return true;
        return false;
      });
    };
    int64_t lowest = rank;
    for (int64_t d = 0; d < (int64_t)rank; ++d)
      if (used(d)) {
        lowest = d;
        break;
      }
    if (lowest < (int64_t)rank)
      k << "    int64_t r = l;\n";
    for (int64_t d = rank - 1; d >= lowest; --d) {
      if (d == 0) {
        k << "    const int64_t i0 = r;\n";
        break;
      }
      if (used(d))
        k << "    const int64_t i" << d << " = r % " << dim(shape[d]) << ";\n";
      if (d > lowest)
        k << "    r /= " << dim(shape[d]) << ";\n";
    }
  }
  fusedBody(op, loads, ins, outs, "    ", k);
  k << "  }\n}\n\n";
  std::string &kname = kernelNames[text];
  if (kname.empty()) {
    kname = "fusedKernel" + std::to_string(kernelCount++);
    kernels += "// " + traceName(op) + "\n__global__ void " + kname + text;
  }
  os << "  " << kname << "<<<dtcBlocks(" << numel(outType)
     << "), 256, 0, c.stream>>>(B";
  for (auto &a : args)
    os << ", " << a;
  os << ");\n";
  os << "  dtc::cuda::launched(\"" << kname << "\");\n";
}

LogicalResult Emitter::emitOp(Operation *op) {
  auto result = [&](unsigned i = 0) { return define(op->getResult(i), op, i); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ParamRefOp p) {
        std::string n = "v" + std::to_string(counter++);
        names[p] = n;
        os << "  float *" << n << " = reinterpret_cast<float *>(P + "
           << placement(p.getParam()).getOffset() << ");\n";
        return success();
      })
      .Case([&](ReshapeOp r) {
        names[r] = name(r.getX());
        return success();
      })
      .Case([&](ConstantOp c) {
        std::string n = result();
        os << "  for (int64_t i = 0; i < " << numel(c.getType()) << "; ++i) "
           << n << "[i] = " << floatLiteral(c.getValue().convertToDouble())
           << ";\n";
        return success();
      })
      .Case([&](BatchSizeOp) {
        std::string n = result();
        os << "  " << n << "[0] = static_cast<float>(B);\n";
        return success();
      })
      .Case([&](GradSeedOp) {
        std::string n = result();
        os << "  " << n << "[0] = a.gradSeed;\n";
        return success();
      })
      .Case([&](FusedOp f) {
        emitFused(f);
        return success();
      })
      .Case([&](MatmulOp m) {
        auto a = m.getLhs().getType().getShape();
        auto b = m.getRhs().getType().getShape();
        bool ta = m.getTransposeLhs(), tb = m.getTransposeRhs();
        std::string M = dim(ta ? a[1] : a[0]), K = dim(ta ? a[0] : a[1]);
        std::string N = dim(tb ? b[0] : b[1]);
        std::string c, beta = "0.0f";
        if (auto it = foldSlot.find(m.getResult()); it != foldSlot.end()) {
          // A gradient accumulated straight into its momentum buffer.
          c = "v" + std::to_string(counter++);
          names[m.getResult()] = c;
          os << "  float *" << c << " = reinterpret_cast<float *>(P + "
             << it->second << ");\n";
          beta = "share";
          foldedInPlace.insert(m.getResult());
        } else {
          c = result();
        }
        os << "  dtc::kern::gemm(" << (ta ? "true" : "false") << ", "
           << (tb ? "true" : "false") << ", " << M << ", " << N << ", " << K
           << ", 1.0f, " << name(m.getLhs()) << ", " << name(m.getRhs())
           << ", " << beta << ", " << c << ");\n";
        return success();
      })
      .Case([&](TransposeOp t) {
        std::string s = shapeArray(t.getX().getType());
        std::string p = "p" + std::to_string(counter++);
        os << "  const int32_t " << p << "[] = {";
        for (auto [i, v] : llvm::enumerate(t.getPerm()))
          os << (i ? ", " : "") << v;
        os << "};\n";
        std::string y = result();
        os << "  dtc::kern::permute(" << name(t.getX()) << ", " << y << ", "
           << t.getPerm().size() << ", " << s << ", " << p << ");\n";
        return success();
      })
      .Case([&](SumToOp s) {
        std::string xs = shapeArray(s.getX().getType());
        std::string ys = shapeArray(s.getType());
        std::string y = result();
        os << "  dtc::kern::sumTo(" << name(s.getX()) << ", "
           << s.getX().getType().getRank() << ", " << xs << ", " << y << ", "
           << s.getType().getRank() << ", " << ys << ");\n";
        return success();
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>([&](auto r) {
        std::string y = result();
        bool isMax = isa<ReduceMaxOp>(r.getOperation());
        os << "  dtc::kern::" << (isMax ? "reduceMax" : "reduceSum") << "("
           << name(r.getX()) << ", " << y << ", "
           << axisView(r.getX().getType(), r.getAxis()) << ");\n";
        if (isa<ReduceMeanOp>(r.getOperation()))
          os << "  for (int64_t i = 0; i < " << numel(r.getType()) << "; ++i) "
             << y << "[i] /= static_cast<float>("
             << dim(r.getX().getType().getDimSize(r.getAxis())) << ");\n";
        return success();
      })
      .Case([&](ReduceMaxGradOp g) {
        std::string dx = result();
        os << "  dtc::kern::reduceMaxGrad(" << name(g.getX()) << ", "
           << name(g.getY()) << ", " << name(g.getDy()) << ", " << dx << ", "
           << axisView(g.getX().getType(), g.getAxis()) << ");\n";
        return success();
      })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto s) {
        std::string y = result();
        os << "  dtc::kern::"
           << (isa<SoftmaxOp>(s.getOperation()) ? "softmax" : "logSoftmax")
           << "(" << name(s.getX()) << ", " << y << ", "
           << axisView(s.getType(), s.getAxis()) << ");\n";
        return success();
      })
      .Case<SoftmaxGradOp, LogSoftmaxGradOp>([&](auto s) {
        std::string dx = result();
        os << "  dtc::kern::"
           << (isa<SoftmaxGradOp>(s.getOperation()) ? "softmaxGrad"
                                                    : "logSoftmaxGrad")
           << "(" << name(s.getY()) << ", " << name(s.getDy()) << ", " << dx
           << ", " << axisView(s.getType(), s.getAxis()) << ");\n";
        return success();
      })
      .Case<CrossEntropyOp, AccuracyOp>([&](auto c) {
        auto s = c.getLogits().getType().getShape();
        std::string out = result();
        os << "  " << out << "[0] = dtc::kern::"
           << (isa<AccuracyOp>(c.getOperation()) ? "accuracy" : "crossEntropy")
           << "(" << name(c.getLogits()) << ", " << name(c.getLabels())
           << ", " << dim(s[0]) << ", " << dim(s[1]) << ");\n";
        return success();
      })
      .Case([&](CrossEntropyGradOp c) {
        auto s = c.getLogits().getType().getShape();
        std::string out = result();
        os << "  dtc::kern::crossEntropyGrad(" << name(c.getLogits()) << ", "
           << name(c.getLabels()) << ", " << dim(s[0]) << ", " << dim(s[1])
           << ", " << name(c.getDloss()) << ", " << out << ");\n";
        return success();
      })
      .Case([&](MseOp m) {
        std::string out = result();
        os << "  " << out << "[0] = dtc::kern::mse(" << name(m.getPrediction())
           << ", " << name(m.getTarget()) << ", "
           << numel(m.getPrediction().getType()) << ");\n";
        return success();
      })
      .Case([&](MseGradOp m) {
        std::string out = result();
        os << "  dtc::kern::mseGrad(" << name(m.getPrediction()) << ", "
           << name(m.getTarget()) << ", " << numel(m.getPrediction().getType())
           << ", " << name(m.getDloss()) << ", " << out << ");\n";
        return success();
      })
      .Case([&](ApplyGradientOp u) { return emitUpdate(u); })
      .Case([&](ExportGradientOp e) {
        emitExport(e);
        return success();
      })
      .Case<AllReduceOp, AllReduceBucketOp, AllReduceStartOp>(
          [&](Operation *o) {
            // Results alias the gradients (in place).
            for (auto [r, g] : llvm::zip(o->getResults(), o->getOperands()))
              if (isa<RankedTensorType>(r.getType()))
                names[r] = name(g);
            int64_t id = isa<AllReduceOp>(o) ? -1 - (int64_t)counter++
                         : isa<AllReduceBucketOp>(o)
                             ? cast<AllReduceBucketOp>(o).getBucket()
                             : cast<AllReduceStartOp>(o).getBucket();
            BucketPlanAttr plan = dialect->getBucketPlanAttrHelper().getAttr(o);
            // With folded momentum, the bucket is its momentum buffers.
            bool folded = !foldSlot.empty() && plan.getMomentumOffset();
            os << "  a.comm->allreduceStart(" << id
               << ", reinterpret_cast<float *>(" << (folded ? "P + " : "F + ")
               << (folded ? *plan.getMomentumOffset() : plan.getOffset()) << "), "
               << plan.getCount() << ");\n";
            if (!isa<AllReduceStartOp>(o))
              os << "  a.comm->wait(" << id << ");\n";
            return success();
          })
      .Case([&](AllReduceWaitOp w) {
        for (auto [r, g] : llvm::zip(w.getResults(), w.getGrads()))
          names[r] = name(g);
        os << "  a.comm->wait(" << w.getBucket() << ");\n";
        return success();
      })
      .Case([&](func::ReturnOp r) {
        emitOutputs(r);
        return success();
      })
      .Default([&](Operation *o) {
        return o->emitError("the C++ emitter cannot emit '")
               << o->getName() << "'; run the dtc pipeline first";
      });
}

LogicalResult Emitter::emitOpCuda(Operation *op) {
  auto result = [&](unsigned i = 0) { return define(op->getResult(i), op, i); };
  auto call = [&](StringRef fn) -> llvm::raw_ostream & {
    return os << "  dtc::cuda::" << fn << "(c, ";
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      // Pointers, collectives and outputs are the same on both targets.
      .Case<ParamRefOp, ReshapeOp, AllReduceOp, AllReduceBucketOp,
            AllReduceStartOp, AllReduceWaitOp, func::ReturnOp>(
          [&](Operation *o) { return emitOp(o); })
      .Case([&](ConstantOp k) {
        std::string n = result();
        call("fill") << n << ", " << numel(k.getType()) << ", "
                     << floatLiteral(k.getValue().convertToDouble()) << ");\n";
        return success();
      })
      .Case([&](BatchSizeOp) {
        std::string n = result();
        call("fill") << n << ", 1, static_cast<float>(B));\n";
        return success();
      })
      .Case([&](GradSeedOp) {
        std::string n = result();
        call("fill") << n << ", 1, a.gradSeed);\n";
        return success();
      })
      .Case([&](FusedOp f) {
        emitFusedCuda(f);
        return success();
      })
      .Case([&](MatmulOp m) {
        auto a = m.getLhs().getType().getShape();
        auto b = m.getRhs().getType().getShape();
        bool ta = m.getTransposeLhs(), tb = m.getTransposeRhs();
        std::string out = result();
        call("gemm") << (ta ? "true" : "false") << ", "
                     << (tb ? "true" : "false") << ", " << dim(ta ? a[1] : a[0])
                     << ", " << dim(tb ? b[0] : b[1]) << ", "
                     << dim(ta ? a[0] : a[1]) << ", 1.0f, " << name(m.getLhs())
                     << ", " << name(m.getRhs()) << ", 0.0f, " << out
                     << ");\n";
        return success();
      })
      .Case([&](TransposeOp t) {
        std::string s = shapeArray(t.getX().getType());
        std::string p = "p" + std::to_string(counter++);
        os << "  const int32_t " << p << "[] = {";
        for (auto [i, v] : llvm::enumerate(t.getPerm()))
          os << (i ? ", " : "") << v;
        os << "};\n";
        std::string y = result();
        call("permute") << name(t.getX()) << ", " << y << ", "
                        << t.getPerm().size() << ", " << s << ", " << p
                        << ");\n";
        return success();
      })
      .Case([&](SumToOp st) {
        std::string xs = shapeArray(st.getX().getType());
        std::string ys = shapeArray(st.getType());
        std::string y = result();
        call("sumTo") << name(st.getX()) << ", "
                      << st.getX().getType().getRank() << ", " << xs << ", "
                      << y << ", " << st.getType().getRank() << ", " << ys
                      << ");\n";
        return success();
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>([&](auto r) {
        std::string y = result();
        bool isMax = isa<ReduceMaxOp>(r.getOperation());
        call(isMax ? "reduceMax" : "reduceSum")
            << name(r.getX()) << ", " << y << ", "
            << axisView(r.getX().getType(), r.getAxis()) << ");\n";
        if (isa<ReduceMeanOp>(r.getOperation()) &&
            kernelNames.try_emplace("scale", "dtcScaleKernel").second)
          kernels += "__global__ void dtcScaleKernel(float *y, int64_t n, "
                     "float s) {\n  for (int64_t i = blockIdx.x * "
                     "int64_t(blockDim.x) + threadIdx.x; i < n; i += "
                     "int64_t(gridDim.x) * blockDim.x)\n    y[i] *= s;\n}\n\n";
        if (isa<ReduceMeanOp>(r.getOperation()))
          os << "  dtcScaleKernel<<<dtcBlocks(" << numel(r.getType())
             << "), 256, 0, c.stream>>>(" << y << ", " << numel(r.getType())
             << ", 1.0f / static_cast<float>("
             << dim(r.getX().getType().getDimSize(r.getAxis())) << "));\n"
             << "  dtc::cuda::launched(\"dtcScaleKernel\");\n";
        return success();
      })
      .Case([&](ReduceMaxGradOp g) {
        std::string dx = result();
        call("reduceMaxGrad") << name(g.getX()) << ", " << name(g.getY())
                              << ", " << name(g.getDy()) << ", " << dx << ", "
                              << axisView(g.getX().getType(), g.getAxis())
                              << ");\n";
        return success();
      })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto sm) {
        std::string y = result();
        call(isa<SoftmaxOp>(sm.getOperation()) ? "softmax" : "logSoftmax")
            << name(sm.getX()) << ", " << y << ", "
            << axisView(sm.getType(), sm.getAxis()) << ");\n";
        return success();
      })
      .Case<SoftmaxGradOp, LogSoftmaxGradOp>([&](auto sg) {
        std::string dx = result();
        call(isa<SoftmaxGradOp>(sg.getOperation()) ? "softmaxGrad"
                                                   : "logSoftmaxGrad")
            << name(sg.getY()) << ", " << name(sg.getDy()) << ", " << dx
            << ", " << axisView(sg.getType(), sg.getAxis()) << ");\n";
        return success();
      })
      .Case<CrossEntropyOp, AccuracyOp>([&](auto ce) {
        auto sh = ce.getLogits().getType().getShape();
        std::string out = result();
        call(isa<AccuracyOp>(ce.getOperation()) ? "accuracy" : "crossEntropy")
            << name(ce.getLogits()) << ", " << name(ce.getLabels()) << ", "
            << dim(sh[0]) << ", " << dim(sh[1]) << ", " << out << ");\n";
        return success();
      })
      .Case([&](CrossEntropyGradOp ce) {
        auto sh = ce.getLogits().getType().getShape();
        std::string out = result();
        call("crossEntropyGrad")
            << name(ce.getLogits()) << ", " << name(ce.getLabels()) << ", "
            << dim(sh[0]) << ", " << dim(sh[1]) << ", " << name(ce.getDloss())
            << ", " << out << ");\n";
        return success();
      })
      .Case([&](MseOp m) {
        std::string out = result();
        call("mse") << name(m.getPrediction()) << ", " << name(m.getTarget())
                    << ", " << numel(m.getPrediction().getType()) << ", "
                    << out << ");\n";
        return success();
      })
      .Case([&](MseGradOp m) {
        std::string out = result();
        call("mseGrad") << name(m.getPrediction()) << ", "
                        << name(m.getTarget()) << ", "
                        << numel(m.getPrediction().getType()) << ", "
                        << name(m.getDloss()) << ", " << out << ");\n";
        return success();
      })
      .Case([&](ExportGradientOp e) {
        emitExport(e);
        return success();
      })
      .Case([&](ApplyGradientOp u) {
        if (emittedUpdates.contains(u))
          return success();
        emitOutputs(cast<func::ReturnOp>(u->getBlock()->getTerminator()));
        // The run of updates that starts here (a bucket's, after its wait)
        // is one kernel launch.
        SmallVector<ApplyGradientOp> run;
        for (Operation *o = u; o; o = o->getNextNode()) {
          auto next = dyn_cast<ApplyGradientOp>(o);
          if (!next)
            break;
          run.push_back(next);
          emittedUpdates.insert(next);
        }
        emitUpdatesCuda(run);
        return success();
      })
      .Default([&](Operation *o) {
        return o->emitError("the CUDA emitter cannot emit '")
               << o->getName() << "'; run the dtc pipeline first";
      });
}

std::string Emitter::updateItem(ApplyGradientOp u) {
  StringRef param = u.getParam();
  std::string n = numel(u.getGrad().getType());
  int64_t offset = placement(param).getOffset();
  int64_t state = placement(param).getStateOffset();
  int states = optimizerStateBuffers(module);
  auto stateAt = [&](int i) -> std::string {
    if (i >= states)
      return "nullptr";
    return "reinterpret_cast<float *>(P + " + std::to_string(state) + " + " +
           std::to_string(i) + " * " + n + " * 4)";
  };
  return "{reinterpret_cast<float *>(P + " + std::to_string(offset) + "), " +
         name(u.getGrad()) + ", " + stateAt(0) + ", " + stateAt(1) + ", " + n +
         "}";
}

void Emitter::emitUpdatesCuda(ArrayRef<ApplyGradientOp> updates) {
  OptimizerKind kind = optimizerOf(module).getKind();
  std::string items = "u" + std::to_string(counter++);
  os << "  const dtc::cuda::UpdateItem " << items << "[] = {\n";
  for (ApplyGradientOp u : updates)
    os << "      " << updateItem(u) << ",\n";
  os << "  };\n";
  if (kind == OptimizerKind::SGD)
    os << "  dtc::cuda::sgdUpdate(c, " << items << ", " << updates.size()
       << ", *a.hyper);\n";
  else
    os << "  dtc::cuda::adamUpdate(c, " << items << ", " << updates.size()
       << ", *a.hyper, " << (kind == OptimizerKind::AdamW ? "true" : "false") << ");\n";
}

void Emitter::emitOutputs(func::ReturnOp r) {
  if (outputsWritten)
    return;
  outputsWritten = true;
  for (auto [i, v] : llvm::enumerate(r.getOperands())) {
    if (target == Target::Cuda) // outputs stay on the device
      os << "  dtc::cuda::copy(c, a.outputs + " << i << ", " << name(v)
         << ", 1);\n";
    else
      os << "  a.outputs[" << i << "] = " << name(v) << "[0];\n";
  }
}

void Emitter::emitExport(ExportGradientOp e) {
  // The loss and metrics first, as before the updates of trainStep.
  emitOutputs(cast<func::ReturnOp>(e->getBlock()->getTerminator()));
  std::string n = numel(e.getGrad().getType());
  if (target == Target::Cuda)
    os << "  dtc::cuda::copy(c, a.paramGrads + " << e.getOffset() << ", "
       << name(e.getGrad()) << ", " << n << ");\n";
  else
    os << "  std::memcpy(a.paramGrads + " << e.getOffset() << ", "
       << name(e.getGrad()) << ", " << n << " * sizeof(float));\n";
}

LogicalResult Emitter::emitUpdate(ApplyGradientOp u) {
  // The loss and metrics are read before any parameter changes (a metric
  // may be a parameter itself).
  emitOutputs(cast<func::ReturnOp>(u->getBlock()->getTerminator()));
  StringRef param = u.getParam();
  int64_t offset = placement(param).getOffset();
  std::string n = numel(u.getGrad().getType());
  OptimizerKind kind = optimizerOf(module).getKind();
  int64_t state = placement(param).getStateOffset();
  std::string w = "reinterpret_cast<float *>(P + " + std::to_string(offset) + ")";
  auto stateAt = [&](int i) {
    return "reinterpret_cast<float *>(P + " + std::to_string(state) + " + " +
           std::to_string(i) + " * " + n + " * 4)";
  };
  if (foldedParams.contains(param)) {
    os << "  dtc::kern::sgdApplyMomentum(" << w << ", " << stateAt(0) << ", " << n
       << ", *a.hyper);\n";
  } else if (kind == OptimizerKind::SGD) {
    os << "  dtc::kern::sgdUpdate(" << w << ", " << name(u.getGrad()) << ", "
       << (optimizerStateBuffers(module) ? stateAt(0) : "nullptr") << ", " << n
       << ", *a.hyper);\n";
  } else {
    os << "  dtc::kern::adamUpdate(" << w << ", " << name(u.getGrad()) << ", "
       << stateAt(0) << ", " << stateAt(1) << ", " << n << ", *a.hyper, "
       << (kind == OptimizerKind::AdamW ? "true" : "false") << ");\n";
  }
  return success();
}

LogicalResult Emitter::emitFunction(func::FuncOp f, StringRef fnName) {
  names.clear();
  outputsWritten = false;
  emittedUpdates.clear();
  int64_t fixedBytes = 0;
  if (ArenaAttr arena = dialect->getArenaAttrHelper().getAttr(f))
    fixedBytes = arena.getFixed();
  else
    return f.emitError("the C++ emitter needs a memory plan (dtc-plan-memory)");
  // The fixed region first, so that its buffers (gradients, buckets) stay put
  // whatever the batch size; the per-sample region after it.
  os << "static void " << fnName << "(const dtc::rt::StepArgs &a) {\n"
     << "  const int64_t B = a.batch;\n"
     << "  char *const P = a.persistent;\n"
     << "  char *const F = a.arena;\n"
     << "  char *const S = a.arena + " << fixedBytes << ";\n";
  if (target == Target::Cuda)
    os << "  const dtc::rt::DeviceContext &c = *a.device;\n  (void)c;\n";
  os << "  (void)B; (void)P; (void)F; (void)S;\n";
  auto x = f.getArgument(0), y = f.getArgument(1);
  names[x] = "x";
  os << "  float *x = const_cast<float *>(a.x);\n";
  if (cast<RankedTensorType>(y.getType()).getElementType().isInteger(32)) {
    names[y] = "y";
    os << "  const int32_t *y = a.yClass;\n";
  } else {
    names[y] = "y";
    os << "  float *y = const_cast<float *>(a.yValue);\n";
  }
  os << "  (void)x; (void)y;\n";
  foldSlot.clear();
  foldedParams.clear();
  foldedInPlace.clear();
  auto folded = [&](const MomentumBucket &bucket) {
    return bool(dialect->getBucketPlanAttrHelper().getAttr(bucket.op).getMomentumOffset());
  };
  if (target == Target::Cpu && f.getSymName() == steps::kTrain) {
    auto buckets = momentumBuckets(module);
    if (buckets && llvm::all_of(*buckets, folded)) {
      for (const MomentumBucket &bucket : *buckets)
        for (auto [grad, member] : llvm::zip(bucket.op->getOperands(), bucket.members)) {
          foldSlot[grad] = placement(member.first).getStateOffset();
          foldedParams.insert(member.first);
        }
      os << "  // SGD momentum folded into the gradient buckets "
            "(dtc.fold_momentum)\n"
         << "  const float share = dtc::kern::momentumShare(*a.hyper, "
            "a.comm->size());\n";
    }
  }
  for (Operation &op : f.front()) {
    if (target == Target::Cuda) {
      if (failed(emitOpCuda(&op)))
        return failure();
      continue;
    }
    bool traced = dialect->getTracedAttrHelper().isAttrPresent(f) && isTraced(&op);
    if (traced)
      os << "  if (a.trace) dtc::rt::traceBegin(a.trace, "
         << cppStringLiteral(traceName(&op)) << ");\n";
    if (failed(emitOp(&op)))
      return failure();
    // A folded gradient made by anything but a GEMM: into its buffer now.
    for (Value r : op.getResults())
      if (auto it = foldSlot.find(r); it != foldSlot.end() && !foldedInPlace.contains(r))
        os << "  dtc::kern::momentumAccumulate(reinterpret_cast<float *>(P + " << it->second
           << "), " << name(r) << ", " << numel(r.getType()) << ", share);\n";
    if (traced)
      os << "  if (a.trace) dtc::rt::traceEnd(a.trace);\n";
  }
  os << "}\n\n";
  return success();
}

void Emitter::emitSpec(func::FuncOp forward, uint64_t fingerprint) {
  RecipeAttr recipe = dialect->getRecipeAttrHelper().getAttr(module);
  OptimizerAttr opt = optimizerOf(module);
  PersistentAttr persistent = dialect->getPersistentAttrHelper().getAttr(module);
  auto str = [&](StringAttr a) { return a ? a.getValue().str() : std::string(); };

  // Parameters.
  // The runtime's names of the initializers (dtc::rt::InitKind).
  auto init = [](InitKind k) {
    switch (k) {
    case InitKind::Zeros: return "Zeros";
    case InitKind::Constant: return "Constant";
    case InitKind::Uniform: return "Uniform";
    case InitKind::Normal: return "Normal";
    case InitKind::GlorotUniform: return "GlorotUniform";
    case InitKind::GlorotNormal: return "GlorotNormal";
    case InitKind::HeUniform: return "HeUniform";
    case InitKind::HeNormal: return "HeNormal";
    }
    llvm_unreachable("an initializer");
  };
  SmallVector<ParamOp> params(module.getOps<ParamOp>());
  os << "static const dtc::rt::ParamSpec kParams[] = {\n";
  for (ParamOp p : params) {
    auto t = cast<RankedTensorType>(p.getType());
    auto s = t.getShape();
    int64_t fanOut = s.empty() ? 1 : s.back();
    int64_t fanIn = s.empty() ? 1 : t.getNumElements() / std::max<int64_t>(fanOut, 1);
    if (s.size() == 1)
      fanIn = s[0];
    os << "    {" << cppStringLiteral(p.getSymName()) << ", " << s.size()
       << ", {";
    for (size_t i = 0; i < 6; ++i)
      os << (i ? ", " : "") << (i < s.size() ? s[i] : 0);
    os << "}, " << t.getNumElements() << ", "
       << placement(p.getSymName()).getOffset()
       << ", dtc::rt::InitKind::" << init(p.getInit()) << ", "
       << llvm::format("%.17g", p.getA().convertToDouble()) << ", "
       << llvm::format("%.17g", p.getB().convertToDouble()) << ", " << fanIn
       << ", " << fanOut << ", "
       << placement(p.getSymName()).getStateOffset() << "},\n";
  }
  if (params.empty())
    os << "    {\"\", 0, {0, 0, 0, 0, 0, 0}, 0, 0, dtc::rt::InitKind::Zeros, 0, 0, 0, 0, 0},\n";
  os << "};\n\n";

  // The bucket plan, in the order the buckets' all-reduces start.
  SmallVector<std::pair<int64_t, SmallVector<int32_t>>> buckets;
  SmallVector<int64_t> counts;
  if (auto train = module.lookupSymbol<func::FuncOp>("train_step")) {
    DenseMap<Value, int32_t> paramOfGrad;
    train.walk([&](ApplyGradientOp u) {
      Value g = u.getGrad();
      int32_t index = paramInfo(u.getParam()).index;
      // Through the wait/bucket result back to the gradient operand.
      if (auto r = dyn_cast<OpResult>(g))
        if (isa<AllReduceBucketOp, AllReduceWaitOp>(r.getOwner()))
          g = r.getOwner()->getOperand(r.getResultNumber() +
                                       (isa<AllReduceWaitOp>(r.getOwner()) ? 1 : 0));
      paramOfGrad[g] = index;
    });
    train.walk([&](Operation *op) {
      if (!isa<AllReduceBucketOp, AllReduceStartOp>(op))
        return;
      SmallVector<int32_t> members;
      for (Value g : op->getOperands())
        members.push_back(paramOfGrad.lookup(g));
      int64_t id = cast<IntegerAttr>(op->getAttr("bucket")).getInt();
      buckets.push_back({id, members});
      counts.push_back(dialect->getBucketPlanAttrHelper().getAttr(op).getCount());
    });
  }
  for (auto [i, bk] : llvm::enumerate(buckets)) {
    os << "static const int32_t kBucket" << i << "Params[] = {";
    for (auto [j, p] : llvm::enumerate(bk.second))
      os << (j ? ", " : "") << p;
    os << "};\n";
  }
  os << "static const dtc::rt::BucketSpec kBuckets[] = {\n";
  for (auto [i, bk] : llvm::enumerate(buckets))
    os << "    {" << bk.first << ", " << counts[i] << ", " << bk.second.size()
       << ", kBucket" << i << "Params},\n";
  if (buckets.empty())
    os << "    {0, 0, 0, nullptr},\n";
  os << "};\n\n";

  ArrayAttr outputs = dialect->getOutputsAttrHelper().getAttr(forward);
  os << "static const char *const kOutputNames[] = {";
  for (auto [i, n] : llvm::enumerate(outputs))
    os << (i ? ", " : "") << cppStringLiteral(cast<StringAttr>(n).getValue());
  os << "};\n\n";

  auto xt = cast<RankedTensorType>(forward.getArgument(0).getType());
  auto yt = cast<RankedTensorType>(forward.getArgument(1).getType());
  bool classes = yt.getElementType().isInteger(32);
  int64_t numClasses = 0;
  forward.walk([&](CrossEntropyOp c) {
    numClasses = c.getLogits().getType().getDimSize(1);
  });
  forward.walk([&](AccuracyOp c) {
    numClasses = c.getLogits().getType().getDimSize(1);
  });
  int64_t perSample = 0, fixed = 0;
  for (auto f : module.getOps<func::FuncOp>()) {
    ArenaAttr arena = dialect->getArenaAttrHelper().getAttr(f);
    perSample = std::max(perSample, arena.getPerSample());
    fixed = std::max(fixed, arena.getFixed());
  }
  const char *dataKind = recipe.getData() == DataKind::IDX         ? "IDX"
                         : recipe.getData() == DataKind::CSV       ? "CSV"
                         : recipe.getData() == DataKind::Synthetic ? "Synthetic"
                                                                   : "None";
  OptimizerKind optKind = opt.getKind();
  os << "static dtc::rt::ModelSpec makeSpec() {\n"
     << "  dtc::rt::ModelSpec s{};\n"
     << "  s.name = " << cppStringLiteral(str(dialect->getModelAttrHelper().getAttr(module))) << ";\n"
     << "  s.source = " << cppStringLiteral(str(dialect->getSourceAttrHelper().getAttr(module))) << ";\n"
     << "  s.inputRank = " << xt.getRank() - 1 << ";\n";
  for (int64_t i = 1; i < xt.getRank(); ++i)
    os << "  s.inputShape[" << i - 1 << "] = " << xt.getDimSize(i) << ";\n";
  os << "  s.inputNumel = " << shape::numElementsPerBatch(xt) << ";\n"
     << "  s.labelKind = dtc::rt::LabelKind::" << (classes ? "Class" : "Value") << ";\n"
     << "  s.labelNumel = " << shape::numElementsPerBatch(yt) << ";\n"
     << "  s.numClasses = " << numClasses << ";\n"
     << "  s.numParams = " << params.size() << ";\n"
     << "  s.params = kParams;\n"
     << "  s.persistentBytes = " << persistent.getBytes() << ";\n"
     << "  s.paramBytes = " << persistent.getParamBytes() << ";\n"
     << "  s.numStates = " << optimizerStateBuffers(module) << ";\n"
     << "  s.arenaPerSample = " << perSample << ";\n"
     << "  s.arenaFixed = " << fixed + 64 << "; // + alignment of the fixed region\n"
     << "  s.numOutputs = " << outputs.size() << ";\n"
     << "  s.outputNames = kOutputNames;\n"
     << "  s.trainStep = trainStep;\n"
     << "  s.evalStep = evalStep;\n"
     << "  s.gradStep = gradStep;\n"
     << "  s.recipe.data.kind = dtc::rt::DatasetKind::" << dataKind << ";\n"
     << "  s.recipe.data.dir = " << cppStringLiteral(recipe.getDir()) << ";\n"
     << "  s.recipe.data.trainPath = " << cppStringLiteral(recipe.getTrain()) << ";\n"
     << "  s.recipe.data.testPath = " << cppStringLiteral(recipe.getTest()) << ";\n"
     << "  s.recipe.data.trainSize = " << recipe.getTrainSize() << ";\n"
     << "  s.recipe.data.testSize = " << recipe.getTestSize() << ";\n"
     << "  s.recipe.batch = " << recipe.getBatch() << ";\n"
     << "  s.recipe.epochs = " << recipe.getEpochs() << ";\n"
     << "  s.recipe.seed = " << recipe.getSeed() << "ULL;\n"
     << "  s.recipe.optimizer = dtc::rt::OptimizerKind::"
     << (optKind == OptimizerKind::Adam    ? "Adam"
         : optKind == OptimizerKind::AdamW ? "AdamW"
                                           : "SGD")
     << ";\n";
  for (auto [field, value] :
       {std::pair<const char *, double>{"lr", opt.getLr()}, {"momentum", opt.getMomentum()},
        {"dampening", opt.getDampening()}, {"weightDecay", opt.getWeightDecay()},
        {"beta1", opt.getBeta1()}, {"beta2", opt.getBeta2()}, {"eps", opt.getEps()}})
    os << "  s.recipe.hyper." << field << " = " << floatLiteral(value) << ";\n";
  os << "  s.recipe.hyper.nesterov = " << (opt.getNesterov() ? 1 : 0) << ";\n"
     << "  s.recipe.hyper.step = 0;\n"
     << "  s.fingerprint = 0x" << llvm::format_hex_no_prefix(fingerprint, 16) << "ULL;\n"
     << "  s.numBuckets = " << buckets.size() << ";\n"
     << "  s.buckets = kBuckets;\n"
     << "  return s;\n}\n\n";
}

LogicalResult Emitter::emit(Target programTarget) {
  if (failed(verifyBackendContract(module)))
    return failure();
  auto forward = module.lookupSymbol<func::FuncOp>(steps::kEval);
  auto train = module.lookupSymbol<func::FuncOp>(steps::kTrain);
  auto grad = module.lookupSymbol<func::FuncOp>(steps::kGrad);
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
  if (cuda)
    os << "// Blocks for a grid-stride loop over n elements.\n"
       << "inline unsigned dtcBlocks(int64_t n) {\n"
       << "  int64_t b = (n + 255) / 256;\n"
       << "  return unsigned(b < 1 ? 1 : b > 4096 ? 4096 : b);\n}\n\n";
  // The steps go to a buffer first: their text (with the bucket plan in it)
  // is the program's fingerprint, which ranks compare before training.
  std::string steps;
  {
    llvm::raw_string_ostream stepsStream(steps);
    std::string cpuSteps;
    llvm::raw_string_ostream cpuStream(cpuSteps);
    Emitter inner(module, cpuStream);
    if (failed(inner.emitFunction(forward, "evalStep")) ||
        failed(inner.emitFunction(train, "trainStep")) ||
        failed(inner.emitFunction(grad, "gradStep")))
      return failure();
    stepsStream << "// Fused elementwise kernels.\n" << inner.kernels
                << cpuSteps;
    if (cuda) {
      std::string cudaSteps;
      llvm::raw_string_ostream cudaStream(cudaSteps);
      Emitter dev(module, cudaStream);
      dev.target = Target::Cuda;
      if (failed(dev.emitFunction(forward, "evalStepCuda")) ||
          failed(dev.emitFunction(train, "trainStepCuda")) ||
          failed(dev.emitFunction(grad, "gradStepCuda")))
        return failure();
      stepsStream << "// CUDA kernels of the fused elementwise ops.\n"
                  << dev.kernels << cudaSteps;
    }
  }
  os << steps;
  uint64_t fingerprint = 0xcbf29ce484222325ULL; // FNV-1a
  for (unsigned char c : steps)
    fingerprint = (fingerprint ^ c) * 0x100000001b3ULL;
  emitSpec(forward, fingerprint);
  if (cuda)
    os << "static dtc::rt::ModelSpec makeSpecWithCuda() {\n"
       << "  dtc::rt::ModelSpec s = makeSpec();\n"
       << "  s.trainStepCuda = trainStepCuda;\n"
       << "  s.evalStepCuda = evalStepCuda;\n"
       << "  s.gradStepCuda = gradStepCuda;\n"
       << "  return s;\n}\n\n";
  os << "} // namespace\n\n"
     << "int main(int argc, char **argv) {\n"
     << "  return dtc::rt::runMain(argc, argv, "
     << (cuda ? "makeSpecWithCuda" : "makeSpec") << "());\n}\n";
  return success();
}

} // namespace

LogicalResult dtc::emitCpp(ModuleOp module, llvm::raw_ostream &os) {
  return Emitter(module, os).emit(Target::Cpu);
}

LogicalResult dtc::emitCuda(ModuleOp module, llvm::raw_ostream &os) {
  return Emitter(module, os).emit(Target::Cuda);
}
