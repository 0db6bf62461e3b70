//===- Parser.h - Lexer and parser of the dtc model language --------------===//
#pragma once

#include "frontends/dsl/AST.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"
#include <optional>

namespace dtc::dsl {

/// Parses `source` (named `filename` in diagnostics). Errors are emitted as
/// MLIR diagnostics at FileLineColLoc(filename, line, col); returns nullopt
/// after the first syntax error.
std::optional<Program> parse(llvm::StringRef source, llvm::StringRef filename,
                             mlir::MLIRContext *context);

} // namespace dtc::dsl
