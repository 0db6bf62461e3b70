//===- Builtins.h - The registry of the DSL's builtin functions
//------------===//
//
// One entry per builtin, as LoweringTable has one lowering per op: its name
// (PyTorch's), its parameters in order with their defaults, what it
// computes, and the builder that makes its ops (Builtins.cpp). The registry
// drives the dispatch of a call, the checking of its arguments (at most its
// positional parameters, keywords among its parameters' names, none twice,
// each error at its place) and the builtin table of docs/dsl.md, which
// `dtc --list-builtins` prints.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"
#include <functional>
#include <vector>

namespace dtc::dsl {
class Gen;
struct Expr;

/// A parameter of a builtin: its name (the keyword), and its default as the
/// docs show it (null: required). Keyword-only parameters follow the
/// positional ones.
struct BuiltinParam {
  const char *name;
  const char *dflt = nullptr;
  bool keywordOnly = false;
  /// Accepted, and not shown in the table (an alias of another keyword).
  bool hidden = false;
};

struct Builtin {
  const char *name;
  std::vector<BuiltinParam> params;
  /// What it computes (the table's second column, Markdown).
  const char *doc;
  /// Makes the call's ops (after its arguments are checked); `assigned` is
  /// the name the result is assigned to ("" when none).
  std::function<mlir::Value(Gen &, const Expr &call, llvm::StringRef assigned)>
      build;
  /// The parameters a call may give by position.
  size_t maxPositional() const;
  /// The index of parameter `name`, or -1.
  int index(llvm::StringRef name) const;
};

/// Every builtin, in the order of the docs' table.
llvm::ArrayRef<Builtin> builtins();
/// The builtin called `name` (an alias is an entry of its own), or null.
const Builtin *findBuiltin(llvm::StringRef name);
/// The Markdown table of the builtins, one row each (docs/dsl.md holds it).
void printBuiltinTable(llvm::raw_ostream &os);

} // namespace dtc::dsl
