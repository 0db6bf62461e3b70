//===- Gen.h - The front end's state: the syntax tree to dtc IR -----------===//
//
// Internal to frontends/dsl: the one generator that MLIRGen.cpp (the
// expression core: declarations, names, operators, blocks, the program),
// Builtins.cpp (every builtin function, by the registry of Builtins.h) and
// Recipe.cpp (the training recipe) define the members of. Semantic checks
// (names, types, shapes) happen here, each reported at the DSL location it
// concerns; shapes are checked with the functions the ops' shape inference
// uses (dialects/dtc/ShapeInference.h), so every op this builds verifies.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "frontends/dsl/AST.h"
#include "frontends/dsl/Builtins.h"

#include "dialects/dtc/DtcDialect.h"
#include "dialects/dtc/ShapeInference.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include <array>
#include <optional>

namespace dtc::dsl {
// The MLIR names the generator's members use (an internal header).
using llvm::SmallVector;
using mlir::FileLineColLoc;
using mlir::InFlightDiagnostic;
using mlir::Location;
using mlir::MLIRContext;
using mlir::ModuleOp;
using mlir::OpBuilder;
using mlir::OwningOpRef;
using mlir::RankedTensorType;
using mlir::Value;

class Gen {
public:
  Gen(MLIRContext *ctx, llvm::StringRef filename)
      : ctx(ctx), filename(filename.str()), b(ctx) {}

  OwningOpRef<ModuleOp> run(const Program &p);

  // (The builtins, Builtins.cpp, and the recipe, Recipe.cpp, use the rest.)
  // Diagnostics ---------------------------------------------------------------
  Location loc(Loc l) {
    return FileLineColLoc::get(ctx, filename, l.line, l.col);
  }
  InFlightDiagnostic error(Loc l) {
    hadError = true;
    return emitError(loc(l));
  }

  // The first cross_entropy/accuracy: the number of classes every other one
  // must have.
  struct Classes {
    int64_t count;
    Loc loc;
    std::string fn;
  };
  std::optional<Classes> classes;
  // The model's input (text data checks its window against it).
  RankedTensorType inputType;

  // Declarations --------------------------------------------------------------
  RankedTensorType declaredType(const TypeDecl &t, bool allowBatch);
  bool declare(const std::string &name, Loc l, Value v);
  Value declareParam(const std::string &name, Loc l, RankedTensorType type,
                     InitKind init, double a, double bb);
  /// A non-trainable buffer (dtc.buffer) filled with `value`; its f32 value
  /// read where the function is being built (null for an i64 buffer).
  Value declareBuffer(const std::string &name, Loc l, RankedTensorType type,
                      double value);
  /// Claims `name` for a parameter or buffer; false after an error.
  bool claimStateName(const std::string &name, Loc l);
  Value paramFromDecl(const Stmt &s);
  struct Init {
    InitKind kind;
    double a, b;
  };
  std::optional<Init> initOf(const Expr &e);

  // Expressions ---------------------------------------------------------------
  Value gen(const Expr &e, llvm::StringRef assignedName = "");
  Value genCall(const Expr &e, llvm::StringRef assignedName);
  // The builtins (Builtins.cpp; the registry, Builtins.h, calls them).
  template <typename Op> Value genUnary(const Expr &e);
  Value genGelu(const Expr &e);
  Value genBinaryCall(const Expr &e, char op);
  Value genSoftmax(const Expr &e);
  Value genReshape(const Expr &e);
  Value genArange(const Expr &e);
  Value genClassLoss(const Expr &e);
  Value genMse(const Expr &e);
  Value genBinary(char op, Loc l, Value lhs, Value rhs);
  Value genMatmul(Loc l, Value lhs, Value rhs);
  Value genTranspose(const Expr &e);
  SmallVector<Value> genSplit(const Expr &e, size_t names);
  Value genConcat(const Expr &e);
  Value genLinear(const Expr &e, llvm::StringRef assignedName);
  Value genReduce(const Expr &e, llvm::StringRef kind);
  Value genConv2d(const Expr &e, llvm::StringRef assignedName);
  Value genPool2d(const Expr &e);
  Value genAdaptiveAvgPool2d(const Expr &e);
  Value genFlatten(const Expr &e);
  Value genDropout(const Expr &e);
  Value genCheckpoint(const Expr &e, llvm::StringRef assignedName);
  Value genBatchNorm(const Expr &e, llvm::StringRef assignedName);
  Value genLayerNorm(const Expr &e, llvm::StringRef assignedName);
  Value genRmsNorm(const Expr &e, llvm::StringRef assignedName);
  std::optional<std::pair<Value, double>>
  rowNormInput(const Expr &e, llvm::StringRef assignedName,
               llvm::StringRef what, llvm::StringRef example);
  Value genEmbedding(const Expr &e, llvm::StringRef assignedName);
  Value genAttention(const Expr &e);
  /// A normalization's `eps` (> 0), its registry default when absent.
  std::optional<double> epsOf(const Expr &call);
  /// A builtin parameter's numeric default, from the registry (the one
  /// place each default is written).
  double defaultOf(const Expr &call, llvm::StringRef param);
  Value activation(const Expr &call, Value y);
  Value requireF32(const Expr &e, llvm::StringRef what);
  Value requireLabels(const Expr &e);
  Value scalar(double v, Loc l);

  // Arguments of builtins
  // ------------------------------------------------------
  /// The argument at `pos` or the keyword `name`; null (after an error when
  /// `required`) if absent.
  const Expr *arg(const Expr &call, size_t pos, llvm::StringRef name,
                  bool required);
  /// A builtin's argument by the name of its parameter (its position from
  /// the registry).
  const Expr *arg(const Expr &call, llvm::StringRef name, bool required);
  /// Checks a call of a builtin against its registry entry: at most its
  /// positional parameters, keywords among its parameters, none twice.
  bool checkCall(const Expr &call);
  bool checkArgs(const Expr &call, size_t maxPositional,
                 llvm::ArrayRef<llvm::StringRef> keywords);
  std::optional<double> number(const Expr &e, llvm::StringRef what);
  std::optional<int64_t> integer(const Expr &e, llvm::StringRef what,
                                 int64_t min);
  std::optional<std::string> string(const Expr &e, llvm::StringRef what);
  std::optional<bool> boolean(const Expr &e, llvm::StringRef what);
  /// An int or a pair [h, w] of ints, each >= min (PyTorch's int or tuple).
  std::optional<std::array<int64_t, 2>>
  pairOf(const Expr &e, llvm::StringRef what, int64_t min);
  /// The call's `axis`, normalized to >= 0; its registry default when
  /// absent (none: required).
  std::optional<int64_t> axisOf(const Expr &call, int64_t rank);
  /// A dimension of a rank-`rank` tensor, -rank..rank-1 (negative from the
  /// end, as PyTorch's dims), normalized to >= 0.
  std::optional<int64_t> dimOf(const Expr &e, int64_t rank);

  // Recipe
  // ---------------------------------------------------------------------
  /// The recipe's data set: its kind and where it is.
  struct Data {
    DataKind kind = DataKind::None;
    std::string dir, train, test;
    int64_t trainSize = 0, testSize = 0;
  };
  /// The module's dtc.model_digest (after everything else).
  void setModelDigest();
  void genRecipe(const Program &p);
  OptimizerAttr genOptimizer(const Expr &e);
  ScheduleAttr genSchedule(const Expr &e);
  void genData(const Expr &e, Data &data);

  MLIRContext *ctx;
  std::string filename;
  OpBuilder b;
  ModuleOp module;
  mlir::Block *body = nullptr; // @forward's entry block
  llvm::StringMap<std::pair<Value, Loc>> names;
  llvm::StringSet<> paramNames;
  llvm::StringSet<> poisoned; // names whose definition failed
  // Blocks by name; while one is instantiated, the prefix of its names
  // ("h0", "h0.attn") and the blocks being instantiated (no recursion).
  llvm::StringMap<const dsl::Block *> blocks;
  std::string prefix;
  llvm::SmallVector<llvm::StringRef> active;
  Value genBlockCall(const dsl::Block &blk, const Expr &e,
                     llvm::StringRef assignedName);
  void genTuple(const Stmt &s);
  std::string batchSymbol;
  Loc batchLoc;
  bool hadError = false;
  std::optional<double> lrOverride;
  int64_t dropouts = 0; // the salt of the next dropout (its own mask)
};

} // namespace dtc::dsl
