//===- AST.h - Syntax tree of the dtc model language ----------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtc::dsl {

/// A position in the source file (1-based).
struct Loc {
  int line = 0, col = 0;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct KeywordArg {
  Loc loc;
  std::string name;
  ExprPtr value;
};

struct Expr {
  enum class Kind { Number, String, Name, Call, Binary, Neg, List };
  Kind kind;
  Loc loc;
  double number = 0;              // Number
  bool isInteger = false;         // Number written without '.', 'e'
  std::string text;               // String value, Name, Call callee
  char op = 0;                    // Binary: + - * / @
  int depth = 1;                  // of the tree below (bounded by the parser)
  std::vector<ExprPtr> args;      // Call args, Binary/Neg operands, List
  std::vector<KeywordArg> kwargs; // Call keyword arguments

  Expr(Kind kind, Loc loc) : kind(kind), loc(loc) {}
};

/// One dimension of a declared type: a size or a symbol (the batch).
struct Dim {
  Loc loc;
  int64_t size = 0;
  std::string symbol; // non-empty for a symbolic dimension
};

struct TypeDecl {
  Loc loc;
  std::string elementType; // "f32" or "i32"
  std::vector<Dim> dims;
};

struct Stmt {
  enum class Kind { Input, Label, Param, Assign, Loss, Metric };
  Kind kind;
  Loc loc;     // the statement's start
  Loc nameLoc; // the name it defines
  std::string name;
  // Assign of several names, `q, k, v = split(x, 3, axis=-1)`: all of
  // them, the first being `name` (empty for one name).
  std::vector<std::pair<std::string, Loc>> names;
  TypeDecl type; // Input, Label, Param
  ExprPtr value; // Assign, Loss, Metric, Param initializer (optional)
};

/// `block name(a, b) { ...assignments...; return expr }`: layers defined
/// once and instantiated by `h0 = name(x, y)`, their parameters prefixed by
/// the instance's name (`h0.ln1.weight`).
struct Block {
  Loc loc, nameLoc;
  std::string name;
  std::vector<std::pair<std::string, Loc>> params;
  std::vector<Stmt> stmts;
  ExprPtr result;
};

struct Setting {
  Loc loc;
  std::string key;
  ExprPtr value;
};

struct Program {
  std::string modelName;
  std::vector<Stmt> stmts;
  std::vector<Block> blocks;
  bool hasTrain = false;
  Loc trainLoc;
  std::vector<Setting> train;
};

} // namespace dtc::dsl
