//===- dsl_fuzz.cpp - The DSL front end through the whole pass pipeline ---===//
//
// Input: model source text. It is parsed, lowered to the dtc dialect,
// verified, run through dtc's full pipeline (autodiff, data parallelism,
// fusion, memory planning) and emitted as C++ and CUDA. Any input must end in
// a diagnostic or in code, never in a crash, a sanitizer report or a hang.
//
//===----------------------------------------------------------------------===//
#include "frontends/dsl/MLIRGen.h"
#include "frontends/dsl/Parser.h"
#include "passes/Passes.h"
#include "passes/codegen/Emit.h"
#include "tools/sanitizer_defaults.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 16384) // models are small; longer inputs only slow the search
    return 0;
  static mlir::DialectRegistry *registry = [] {
    auto *r = new mlir::DialectRegistry;
    dtc::registerDialects(*r);
    return r;
  }();
  mlir::MLIRContext context(*registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) { return mlir::success(); });
  const llvm::StringRef source(reinterpret_cast<const char *>(data), size);
  auto program = dtc::dsl::parse(source, "fuzz.dsl", &context);
  if (!program)
    return 0;
  auto module = dtc::dsl::buildModule(*program, "fuzz.dsl", &context);
  if (!module)
    return 0;
  mlir::PassManager pm(&context);
  dtc::buildPipeline(pm, dtc::PipelineOptions());
  pm.addPass(dtc::createLowerToRuntime());
  if (mlir::failed(pm.run(*module)))
    return 0;
  // Both printers: the CPU's, then (the spec's target changed) CUDA's.
  std::string out;
  llvm::raw_string_ostream os(out);
  (void)dtc::emitSource(*module, os);
  if (dtcrt::SpecOp spec = dtc::specOf(*module)) {
    spec.setTarget(dtcrt::Target::Cuda);
    (void)dtc::emitSource(*module, os);
  }
  return 0;
}
