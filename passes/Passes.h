//===- Passes.h - dtc passes and pipelines --------------------------------===//
#pragma once

#include "dialects/dtc/DtcDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace dtc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Options of the whole compile pipeline (`dtc-pipeline` in dtc-opt).
struct PipelineOptions : public mlir::PassPipelineOptions<PipelineOptions> {
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("Fuse elementwise chains"),
                    llvm::cl::init(true)};
};

/// autodiff -> canonicalize -> cse -> fuse-elementwise -> plan-memory
void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// Registers the dialects every dtc tool loads.
void registerDialects(mlir::DialectRegistry &registry);
/// Registers dtc's passes, the upstream ones the pipeline uses, and pipelines.
void registerAllPasses();

/// Number of optimizer state buffers per parameter for the module's
/// `dtc.optimizer` attribute (SGD with momentum: 1, Adam/AdamW: 2, else 0).
int optimizerStateBuffers(mlir::ModuleOp module);

} // namespace dtc
