//===- MLIRGen.h - From the syntax tree to the dtc dialect ----------------===//
#pragma once

#include "frontends/dsl/AST.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace dtc::dsl {

/// Builds the module for `program`: dtc.param declarations, func.func
/// @forward(input, label) -> (loss, metrics...), the optimizer and recipe as
/// module attributes. Name, type and shape errors are emitted at the source
/// location; returns null after any error.
mlir::OwningOpRef<mlir::ModuleOp> buildModule(const Program &program,
                                              llvm::StringRef filename,
                                              mlir::MLIRContext *context);

} // namespace dtc::dsl
