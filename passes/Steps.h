//===- Steps.h - The step functions of a dtc module -----------------------===//
//
// A dtc module holds its steps as functions: `@forward` (from the front end:
// loss and metrics), `@train_step` (dtc-autodiff: forward, backward, update),
// and, from dtc-derive-steps, `@grad_step` (the gradients only, for gradient
// checks) and `@eval_step` (evaluation), and with gradient accumulation
// `@accumulate_step` (dtc-accumulate-gradients). Passes find them here by
// name.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace dtc::steps {
constexpr llvm::StringLiteral kForward = "forward";
constexpr llvm::StringLiteral kTrain = "train_step";
constexpr llvm::StringLiteral kGrad = "grad_step";
constexpr llvm::StringLiteral kEval = "eval_step";
/// With gradient accumulation (dtc-accumulate-gradients): the micro-batches
/// before an optimizer step's last.
constexpr llvm::StringLiteral kAccumulate = "accumulate_step";

/// The module's @train_step, or an error naming `pass` (which needs it) and
/// null when there is none.
inline mlir::func::FuncOp trainStep(mlir::ModuleOp module, mlir::Pass &pass) {
  auto step = module.lookupSymbol<mlir::func::FuncOp>(kTrain);
  if (!step)
    module.emitError() << pass.getArgument()
                       << " needs a func.func @train_step (run dtc-autodiff "
                          "first)";
  return step;
}
} // namespace dtc::steps
