//===- dtc-tblgen.cpp - dtc's TableGen backends ---------------------------===//
//
// mlir-tblgen with dtc's own backends, as MLIR projects generate their C++
// from ODS:
//   -gen-runtime-abi        the C++ declarations of the runtime's entry
//                           points, one per dtcrt op with the KernelCall
//                           trait (a Dtcrt_Call def): the text that
//                           dtc/kernels.h (dtc::kern) and dtc/cuda.h
//                           (dtc::cuda) include, so that the ABI between
//                           the generated programs and the runtime is
//                           written once, in dialects/dtcrt/DtcrtOps.td;
//   -gen-runtime-abi-calls  a C++ function that calls every entry point
//                           once on each target, with value-initialized
//                           arguments of its parameters' types: compiled
//                           against both headers and linked against both
//                           runtime libraries (test/abi), it fails where a
//                           declaration or a definition is missing or
//                           differs.
// The name of an entry point is its op's in camelCase (dtcrt.reduce_sum is
// reduceSum, as dtcrt::calleeOf gives it), its parameters the operands'
// names in camelCase, after the step's context.
//
//===----------------------------------------------------------------------===//
#include "mlir/TableGen/GenInfo.h"
#include "mlir/TableGen/Operator.h"
#include "mlir/TableGen/SideEffects.h"
#include "mlir/Tools/mlir-tblgen/MlirTblgenMain.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Record.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::tblgen;
using llvm::Record;
using llvm::RecordKeeper;
using llvm::StringRef;

namespace {

/// snake_case to camelCase (dtcrt::calleeOf's rule).
std::string camel(StringRef snake) {
  std::string out;
  bool upper = false;
  for (char ch : snake) {
    if (ch == '_') {
      upper = true;
      continue;
    }
    out += upper ? char(llvm::toUpper(ch)) : ch;
    upper = false;
  }
  return out;
}

struct Param {
  std::string type; // "const float *", "int64_t", "const rt::Hyper &"
  std::string name;
};

struct Entry {
  const Record *def;
  std::string name;
  std::string mnemonic;
  bool cpuOnly;
  std::vector<Param> params;
  std::string summary, description;
};

/// Whether operand `i` of `op` carries a MemWrite effect (dtcrt's Out).
bool writes(const Operator &op, int i) {
  for (Operator::VariableDecorator d : op.getArgDecorators(i))
    if (auto *effect = llvm::dyn_cast<SideEffect>(&d))
      if (effect->getName().ends_with("Write"))
        return true;
  return false;
}

/// The C++ type of a call's operand.
std::string cppType(const Operator &op, int i, const NamedTypeConstraint &v) {
  StringRef def = v.constraint.getDefName();
  const bool w = writes(op, i);
  auto ptr = [&](StringRef element) {
    return (w ? "" : "const ") + element.str() + " *";
  };
  if (def == "Dtcrt_F32Ptr")
    return ptr("float");
  if (def == "Dtcrt_I32Ptr")
    return ptr("int32_t");
  if (def == "Dtcrt_I64Ptr")
    return ptr("int64_t");
  if (def == "I1")
    return "bool";
  if (def == "I32")
    return "int32_t";
  if (def == "I64")
    return "int64_t";
  if (def == "Dtcrt_Seed")
    return "uint64_t";
  if (def == "F32")
    return "float";
  if (def == "Dtcrt_I64Array")
    return "const int64_t *";
  if (def == "Dtcrt_I32Array")
    return "const int32_t *";
  if (def == "Dtcrt_ItemsType")
    return "const rt::UpdateItem *";
  if (def == "Dtcrt_HyperType")
    return "const rt::Hyper &";
  llvm::PrintFatalError(op.getLoc(), "dtc-tblgen: operand '" + v.name.str() +
                                         "' of " + op.getOperationName() +
                                         " has a type constraint (" + def +
                                         ") without a C++ type of the ABI");
}

/// The entry points, in their order in the .td file.
std::vector<Entry> entries(const RecordKeeper &records) {
  std::vector<const Record *> defs;
  for (const Record *def : records.getAllDerivedDefinitions("Op"))
    if (def->isSubClassOf("Dtcrt_Call"))
      defs.push_back(def);
  std::sort(defs.begin(), defs.end(), [](const Record *a, const Record *b) {
    return a->getLoc()[0].getPointer() < b->getLoc()[0].getPointer();
  });
  std::vector<Entry> out;
  for (const Record *def : defs) {
    Operator op(def);
    Entry e{def,
            camel(op.getOperationName().substr(op.getOperationName().find('.') +
                                               1)),
            op.getOperationName(),
            def->getValueAsBit("cpuOnly"),
            {},
            op.getSummary().str(),
            op.getDescription().str()};
    for (int i = 0, n = op.getNumArgs(); i < n; ++i) {
      auto *v = llvm::dyn_cast<NamedTypeConstraint *>(op.getArg(i));
      if (!v)
        llvm::PrintFatalError(op.getLoc(),
                              "dtc-tblgen: a runtime call takes operands only "
                              "(its parameters); " +
                                  op.getOperationName() + " has an attribute");
      if (v->isVariableLength())
        llvm::PrintFatalError(op.getLoc(),
                              "dtc-tblgen: a runtime call's operands are "
                              "one value each");
      e.params.push_back({cppType(op, i, *v), camel(v->name)});
    }
    out.push_back(std::move(e));
  }
  return out;
}

/// `text` as `//` comment lines of at most 78 columns, each with `indent`.
void comment(llvm::raw_ostream &os, StringRef text) {
  llvm::SmallVector<StringRef> words;
  for (StringRef line : llvm::split(text.trim(), '\n')) {
    llvm::SmallVector<StringRef> lineWords;
    line.split(lineWords, ' ', -1, false);
    words.append(lineWords);
  }
  std::string line = "//";
  for (StringRef w : words) {
    if (line.size() + 1 + w.size() > 78 && line != "//") {
      os << line << "\n";
      line = "//";
    }
    line += " " + w.str();
  }
  if (line != "//")
    os << line << "\n";
}

bool emitAbi(const RecordKeeper &records, llvm::raw_ostream &os) {
  os << "// The runtime's entry points that generated steps call: generated "
        "by\n"
        "// dtc-tblgen -gen-runtime-abi from dialects/dtcrt/DtcrtOps.td, one "
        "per\n"
        "// dtcrt op with the KernelCall trait. Do not edit: change the op, "
        "then\n"
        "// run scripts/gen-runtime-abi.sh (ctest abi.up_to_date compares).\n"
        "//\n"
        "// dtc/kernels.h (dtc::kern, DTC_ABI_CPU 1) and dtc/cuda.h "
        "(dtc::cuda,\n"
        "// DTC_ABI_CPU 0) include it in their namespace, with "
        "DTC_ABI_CONTEXT\n"
        "// the step's context (rt::HostContext, rt::DeviceContext).\n";
  for (const Entry &e : entries(records)) {
    os << "\n";
    if (e.cpuOnly)
      os << "#if DTC_ABI_CPU\n";
    StringRef summary(e.summary);
    summary.consume_front("Calls ");
    comment(os, e.mnemonic + ": " + summary.str());
    if (!e.description.empty())
      comment(os, e.description);
    os << "void " << e.name << "(const DTC_ABI_CONTEXT &ctx";
    for (const Param &p : e.params) {
      os << ", " << p.type;
      if (!StringRef(p.type).ends_with("*") &&
          !StringRef(p.type).ends_with("&"))
        os << " ";
      os << p.name;
    }
    os << ");\n";
    if (e.cpuOnly)
      os << "#endif\n";
  }
  return false;
}

bool emitCalls(const RecordKeeper &records, llvm::raw_ostream &os) {
  os << "// Generated by dtc-tblgen -gen-runtime-abi-calls from "
        "dialects/dtcrt/DtcrtOps.td.\n"
        "// One call of every runtime entry point: the CPU's (dtc::kern) and, "
        "with\n"
        "// DTC_ABI_CALLS_CUDA, CUDA's (dtc::cuda), each argument "
        "value-initialized.\n"
        "#include \"dtc/kernels.h\"\n"
        "#if DTC_ABI_CALLS_CUDA\n#include \"dtc/cuda.h\"\n#endif\n\n"
        "namespace dtc::abi {\n"
        "template <class T> T arg() { return T{}; }\n\n"
        "/// Calls every entry point (never run: it is compiled and linked).\n"
        "inline void callEveryEntryPoint() {\n"
        "  const rt::HostContext host{};\n"
        "  const rt::Hyper hyper{};\n";
  std::vector<Entry> all = entries(records);
  auto print = [&](StringRef ns, StringRef ctx, bool cuda) {
    for (const Entry &e : all) {
      if (cuda && e.cpuOnly)
        continue;
      os << "  " << ns << "::" << e.name << "(" << ctx;
      for (const Param &p : e.params) {
        StringRef t(p.type);
        if (t == "const rt::Hyper &")
          os << ", hyper";
        else
          os << ", arg<" << t << ">()";
      }
      os << ");\n";
    }
  };
  print("kern", "host", false);
  os << "#if DTC_ABI_CALLS_CUDA\n"
        "  const rt::DeviceContext device{};\n";
  print("cuda", "device", true);
  os << "#endif\n}\n} // namespace dtc::abi\n";
  return false;
}

GenRegistration genAbi("gen-runtime-abi",
                       "The runtime's entry points: C++ declarations", emitAbi);
GenRegistration genCalls("gen-runtime-abi-calls",
                         "One call of every runtime entry point", emitCalls);

} // namespace

int main(int argc, char **argv) { return MlirTblgenMain(argc, argv); }
