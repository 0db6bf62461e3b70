//===- Parser.cpp - Lexer and recursive-descent parser of the DSL ---------===//
#include "frontends/dsl/Parser.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringExtras.h"
#include <cctype>
#include <cmath>
#include <cstdlib>

using namespace dtc::dsl;

namespace {

enum class Tok {
  Eof,
  Ident,
  Number,
  String,
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Equal,
  Plus,
  Minus,
  Star,
  Slash,
  At,
  Semicolon,
  Error
};

struct Token {
  Tok kind = Tok::Eof;
  Loc loc;
  std::string text;
  double number = 0;
  bool isInteger = false;
};

const char *describe(Tok t) {
  switch (t) {
  case Tok::Eof:
    return "end of file";
  case Tok::Ident:
    return "a name";
  case Tok::Number:
    return "a number";
  case Tok::String:
    return "a string";
  case Tok::LParen:
    return "'('";
  case Tok::RParen:
    return "')'";
  case Tok::LBracket:
    return "'['";
  case Tok::RBracket:
    return "']'";
  case Tok::LBrace:
    return "'{'";
  case Tok::RBrace:
    return "'}'";
  case Tok::Comma:
    return "','";
  case Tok::Colon:
    return "':'";
  case Tok::Equal:
    return "'='";
  case Tok::Plus:
    return "'+'";
  case Tok::Minus:
    return "'-'";
  case Tok::Star:
    return "'*'";
  case Tok::Slash:
    return "'/'";
  case Tok::At:
    return "'@'";
  case Tok::Semicolon:
    return "';'";
  case Tok::Error:
    return "an invalid character";
  }
  return "?";
}

class Lexer {
public:
  explicit Lexer(llvm::StringRef src) : src(src) {}

  Token next() {
    skipSpaceAndComments();
    Token t;
    t.loc = {line, col};
    if (pos >= src.size()) {
      t.kind = Tok::Eof;
      return t;
    }
    char c = src[pos];
    if (std::isalpha((unsigned char)c) || c == '_') {
      size_t start = pos;
      // A dotted name (`wte.weight`: a layer's parameter) is one name.
      auto partStart = [&](size_t at) {
        return at < src.size() &&
               (std::isalpha((unsigned char)src[at]) || src[at] == '_');
      };
      while (pos < src.size() &&
             (std::isalnum((unsigned char)src[pos]) || src[pos] == '_' ||
              (src[pos] == '.' && partStart(pos + 1))))
        advance();
      t.kind = Tok::Ident;
      t.text = src.substr(start, pos - start).str();
      return t;
    }
    if (std::isdigit((unsigned char)c) ||
        (c == '.' && pos + 1 < src.size() &&
         std::isdigit((unsigned char)src[pos + 1])))
      return lexNumber(t);
    if (c == '"')
      return lexString(t);
    advance();
    switch (c) {
    case '(':
      t.kind = Tok::LParen;
      break;
    case ')':
      t.kind = Tok::RParen;
      break;
    case '[':
      t.kind = Tok::LBracket;
      break;
    case ']':
      t.kind = Tok::RBracket;
      break;
    case '{':
      t.kind = Tok::LBrace;
      break;
    case '}':
      t.kind = Tok::RBrace;
      break;
    case ',':
      t.kind = Tok::Comma;
      break;
    case ':':
      t.kind = Tok::Colon;
      break;
    case '=':
      t.kind = Tok::Equal;
      break;
    case '+':
      t.kind = Tok::Plus;
      break;
    case '-':
      t.kind = Tok::Minus;
      break;
    case '*':
      t.kind = Tok::Star;
      break;
    case '/':
      t.kind = Tok::Slash;
      break;
    case '@':
      t.kind = Tok::At;
      break;
    case ';':
      t.kind = Tok::Semicolon;
      break;
    default:
      t.kind = Tok::Error;
      t.text = std::isprint((unsigned char)c)
                   ? std::string("invalid character '") + c + "'"
                   : "invalid byte 0x" + llvm::utohexstr((unsigned char)c);
    }
    return t;
  }

private:
  void advance() {
    if (src[pos] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    ++pos;
  }
  void skipSpaceAndComments() {
    while (pos < src.size()) {
      if (std::isspace((unsigned char)src[pos]))
        advance();
      else if (src[pos] == '#')
        while (pos < src.size() && src[pos] != '\n')
          advance();
      else
        break;
    }
  }
  Token lexNumber(Token &t) {
    size_t start = pos;
    bool integer = true;
    while (pos < src.size() && std::isdigit((unsigned char)src[pos]))
      advance();
    if (pos < src.size() && src[pos] == '.') {
      integer = false;
      advance();
      while (pos < src.size() && std::isdigit((unsigned char)src[pos]))
        advance();
    }
    if (pos < src.size() && (src[pos] == 'e' || src[pos] == 'E')) {
      size_t save = pos;
      int saveLine = line, saveCol = col;
      advance();
      if (pos < src.size() && (src[pos] == '+' || src[pos] == '-'))
        advance();
      if (pos < src.size() && std::isdigit((unsigned char)src[pos])) {
        integer = false;
        while (pos < src.size() && std::isdigit((unsigned char)src[pos]))
          advance();
      } else {
        pos = save;
        line = saveLine;
        col = saveCol;
      }
    }
    std::string text = src.substr(start, pos - start).str();
    t.kind = Tok::Number;
    t.text = text;
    t.number = std::strtod(text.c_str(), nullptr);
    t.isInteger = integer;
    if (!std::isfinite(t.number) || std::fabs(t.number) > 3.4028234e38) {
      t.kind = Tok::Error;
      t.text = "number " + text +
               " is out of range (f32 values are at most "
               "3.4e38)";
    }
    return t;
  }
  Token lexString(Token &t) {
    advance(); // opening quote
    std::string value;
    while (pos < src.size() && src[pos] != '"' && src[pos] != '\n') {
      if (src[pos] == '\\' && pos + 1 < src.size()) {
        advance();
        char e = src[pos];
        value += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        advance();
        continue;
      }
      value += src[pos];
      advance();
    }
    if (pos >= src.size() || src[pos] != '"') {
      t.kind = Tok::Error;
      t.text = "unterminated string";
      return t;
    }
    advance();
    t.kind = Tok::String;
    t.text = value;
    return t;
  }

  llvm::StringRef src;
  size_t pos = 0;
  int line = 1, col = 1;
};

class Parser {
public:
  Parser(llvm::StringRef src, llvm::StringRef filename, mlir::MLIRContext *ctx)
      : lexer(src), filename(filename), ctx(ctx) {
    tok = lexer.next();
    peekTok = lexer.next();
  }

  std::optional<Program> parseProgram() {
    Program p;
    if (isKeyword("model")) {
      consume();
      if (!expect(Tok::Ident, "a model name after 'model'"))
        return std::nullopt;
      p.modelName = prev.text;
    }
    while (tok.kind != Tok::Eof) {
      if (tok.kind == Tok::Semicolon) {
        consume();
        continue;
      }
      if (isKeyword("train")) {
        if (p.hasTrain)
          return error(tok.loc, "a model has one 'train' block"), std::nullopt;
        p.hasTrain = true;
        p.trainLoc = tok.loc;
        consume();
        if (!parseTrain(p))
          return std::nullopt;
        continue;
      }
      if (isKeyword("block") && peekTok.kind == Tok::Ident) {
        if (!parseBlock(p))
          return std::nullopt;
        continue;
      }
      auto s = parseStmt();
      if (!s)
        return std::nullopt;
      p.stmts.push_back(std::move(*s));
    }
    return p;
  }

private:
  // Token handling -----------------------------------------------------------
  void consume() {
    prev = std::move(tok);
    tok = std::move(peekTok);
    peekTok = lexer.next();
  }
  bool isKeyword(llvm::StringRef kw) const {
    return tok.kind == Tok::Ident && tok.text == kw;
  }
  void error(Loc loc, const llvm::Twine &msg) {
    mlir::emitError(mlir::FileLineColLoc::get(ctx, filename, loc.line, loc.col),
                    msg);
  }
  /// Reports the current token as unexpected.
  void unexpected(llvm::StringRef wanted) {
    if (tok.kind == Tok::Error)
      return error(tok.loc, tok.text);
    std::string got = describe(tok.kind);
    if (tok.kind == Tok::Ident || tok.kind == Tok::Number)
      got += " '" + tok.text + "'";
    error(tok.loc, "expected " + wanted + ", got " + got);
  }
  bool expect(Tok kind, llvm::StringRef wanted) {
    if (tok.kind != kind) {
      unexpected(wanted);
      return false;
    }
    consume();
    return true;
  }

  // Statements ---------------------------------------------------------------
  /// A name a statement may define (false after an error): not a dotted
  /// one, which reads a layer's parameter.
  bool assignable(const Token &name) {
    if (!llvm::StringRef(name.text).contains('.'))
      return true;
    error(name.loc, "'" + name.text +
                        "' cannot be assigned: a dotted name is a layer's "
                        "parameter");
    return false;
  }
  std::optional<Stmt> parseStmt() {
    Stmt s;
    s.loc = tok.loc;
    if (tok.kind != Tok::Ident) {
      unexpected("a statement");
      return std::nullopt;
    }
    if ((peekTok.kind == Tok::Equal || peekTok.kind == Tok::Comma) &&
        !assignable(tok))
      return std::nullopt;
    if (peekTok.kind == Tok::Comma) {
      // `a, b, c = expr`: one name per value of a call that gives several
      s.kind = Stmt::Kind::Assign;
      s.name = tok.text;
      s.nameLoc = tok.loc;
      s.names.push_back({tok.text, tok.loc});
      consume();
      while (tok.kind == Tok::Comma) {
        consume();
        if (!expect(Tok::Ident, "a name after ','"))
          return std::nullopt;
        if (!assignable(prev))
          return std::nullopt;
        s.names.push_back({prev.text, prev.loc});
      }
      if (!expect(Tok::Equal, "'=' after the names"))
        return std::nullopt;
      s.value = parseExpr();
      if (!s.value)
        return std::nullopt;
      return s;
    }
    if (peekTok.kind == Tok::Equal) {
      // `name = expr` (the name `loss` designates the objective)
      s.kind = tok.text == "loss" ? Stmt::Kind::Loss : Stmt::Kind::Assign;
      s.name = tok.text;
      s.nameLoc = tok.loc;
      consume();
      consume();
      s.value = parseExpr();
      if (!s.value)
        return std::nullopt;
      return s;
    }
    std::string kw = tok.text;
    if (kw == "input" || kw == "label" || kw == "param") {
      s.kind = kw == "input"   ? Stmt::Kind::Input
               : kw == "label" ? Stmt::Kind::Label
                               : Stmt::Kind::Param;
      consume();
      if (!expect(Tok::Ident, "a name after '" + kw + "'"))
        return std::nullopt;
      s.name = prev.text;
      s.nameLoc = prev.loc;
      if (!expect(Tok::Colon, "':' and a type after '" + s.name + "'"))
        return std::nullopt;
      if (!parseType(s.type))
        return std::nullopt;
      if (s.kind == Stmt::Kind::Param && tok.kind == Tok::Equal) {
        consume();
        s.value = parseExpr();
        if (!s.value)
          return std::nullopt;
      }
      return s;
    }
    if (kw == "metric") {
      s.kind = Stmt::Kind::Metric;
      consume();
      if (!expect(Tok::Ident, "a metric name after 'metric'") ||
          !assignable(prev))
        return std::nullopt;
      s.name = prev.text;
      s.nameLoc = prev.loc;
      if (!expect(Tok::Equal, "'=' after the metric name"))
        return std::nullopt;
      s.value = parseExpr();
      if (!s.value)
        return std::nullopt;
      return s;
    }
    error(tok.loc, "expected a statement (input, label, param, metric, train "
                   "or 'name = expression'), got '" +
                       tok.text + "'");
    return std::nullopt;
  }

  bool parseType(TypeDecl &t) {
    t.loc = tok.loc;
    if (tok.kind != Tok::Ident || (tok.text != "f32" && tok.text != "i32")) {
      unexpected("a type (f32[...] or i32[...])");
      return false;
    }
    t.elementType = tok.text;
    consume();
    if (!expect(Tok::LBracket, "'[' and the dimensions of the type"))
      return false;
    while (tok.kind != Tok::RBracket) {
      Dim d;
      d.loc = tok.loc;
      if (tok.kind == Tok::Number && tok.isInteger && tok.number >= 1 &&
          tok.number <= (double)(int64_t(1) << 40)) {
        d.size = (int64_t)tok.number;
      } else if (tok.kind == Tok::Ident) {
        d.symbol = tok.text;
      } else {
        unexpected("a dimension (a positive integer or the batch symbol)");
        return false;
      }
      consume();
      t.dims.push_back(d);
      if (tok.kind == Tok::Comma)
        consume();
      else if (tok.kind != Tok::RBracket) {
        unexpected("',' or ']'");
        return false;
      }
    }
    consume();
    return true;
  }

  /// block NAME '(' [NAME (',' NAME)*] ')' '{' stmt* 'return' expr '}'
  bool parseBlock(Program &p) {
    Block blk;
    blk.loc = tok.loc;
    consume(); // block
    blk.name = tok.text;
    blk.nameLoc = tok.loc;
    if (!assignable(tok))
      return false;
    consume();
    for (const Block &other : p.blocks)
      if (other.name == blk.name) {
        error(blk.nameLoc, "block '" + blk.name +
                               "' is defined twice (the first is at line " +
                               llvm::Twine(other.nameLoc.line) + ")");
        return false;
      }
    if (!expect(Tok::LParen, "'(' and the block's inputs"))
      return false;
    while (tok.kind != Tok::RParen) {
      if (!expect(Tok::Ident, "an input name or ')'") || !assignable(prev))
        return false;
      blk.params.push_back({prev.text, prev.loc});
      if (tok.kind == Tok::Comma)
        consume();
      else if (tok.kind != Tok::RParen)
        return unexpected("',' or ')'"), false;
    }
    consume();
    if (!expect(Tok::LBrace, "'{' and the block's statements"))
      return false;
    while (!blk.result) {
      if (tok.kind == Tok::Semicolon) {
        consume();
        continue;
      }
      if (isKeyword("return")) {
        consume();
        blk.result = parseExpr();
        if (!blk.result)
          return false;
        break;
      }
      if (tok.kind == Tok::RBrace || tok.kind == Tok::Eof) {
        error(tok.loc, "block '" + blk.name +
                           "' ends without 'return': a block gives one value");
        return false;
      }
      auto s = parseStmt();
      if (!s)
        return false;
      blk.stmts.push_back(std::move(*s));
    }
    while (tok.kind == Tok::Semicolon)
      consume();
    if (!expect(Tok::RBrace, "'}' after the block's return"))
      return false;
    p.blocks.push_back(std::move(blk));
    return true;
  }

  bool parseTrain(Program &p) {
    if (!expect(Tok::LBrace, "'{' after 'train'"))
      return false;
    while (tok.kind != Tok::RBrace) {
      if (tok.kind == Tok::Semicolon) {
        consume();
        continue;
      }
      Setting s;
      s.loc = tok.loc;
      if (!expect(Tok::Ident, "a setting name or '}'"))
        return false;
      s.key = prev.text;
      if (!expect(Tok::Equal, "'=' after '" + s.key + "'"))
        return false;
      s.value = parseExpr();
      if (!s.value)
        return false;
      p.train.push_back(std::move(s));
    }
    consume();
    return true;
  }

  // Expressions --------------------------------------------------------------
  /// Expressions deeper than this are rejected (they would exhaust the stack
  /// of the recursive passes over the tree).
  static constexpr int kMaxDepth = 256;

  ExprPtr parseExpr() {
    if (++depth > kMaxDepth) {
      error(tok.loc, "expression nested too deeply (more than " +
                         llvm::Twine(kMaxDepth) + " levels)");
      --depth;
      return nullptr;
    }
    ExprPtr e = parseAdditive();
    --depth;
    return e;
  }

  /// Sets the depth of a call or list node from its arguments.
  ExprPtr checkDepth(ExprPtr e) {
    for (const ExprPtr &a : e->args)
      e->depth = std::max(e->depth, a->depth + 1);
    for (const KeywordArg &k : e->kwargs)
      e->depth = std::max(e->depth, k.value->depth + 1);
    if (e->depth > kMaxDepth) {
      error(e->loc, "expression nested too deeply (more than " +
                        llvm::Twine(kMaxDepth) + " levels)");
      return nullptr;
    }
    return e;
  }

  /// A binary node; the tree of a long chain `a + b + c ...` is as deep as
  /// the chain is long, so its depth counts too.
  ExprPtr binary(char op, Loc loc, ExprPtr l, ExprPtr r) {
    int d = 1 + std::max(l->depth, r->depth);
    if (d > kMaxDepth) {
      error(loc, "expression nested too deeply (more than " +
                     llvm::Twine(kMaxDepth) + " levels)");
      return nullptr;
    }
    auto e = std::make_unique<Expr>(Expr::Kind::Binary, loc);
    e->op = op;
    e->depth = d;
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  ExprPtr parseAdditive() {
    ExprPtr lhs = parseMultiplicative();
    while (lhs && (tok.kind == Tok::Plus || tok.kind == Tok::Minus)) {
      char op = tok.kind == Tok::Plus ? '+' : '-';
      Loc loc = tok.loc;
      consume();
      ExprPtr rhs = parseMultiplicative();
      if (!rhs)
        return nullptr;
      lhs = binary(op, loc, std::move(lhs), std::move(rhs));
      if (!lhs)
        return nullptr;
    }
    return lhs;
  }

  ExprPtr parseMultiplicative() {
    ExprPtr lhs = parseUnary();
    while (lhs && (tok.kind == Tok::Star || tok.kind == Tok::Slash ||
                   tok.kind == Tok::At)) {
      char op = tok.kind == Tok::Star    ? '*'
                : tok.kind == Tok::Slash ? '/'
                                         : '@';
      Loc loc = tok.loc;
      consume();
      ExprPtr rhs = parseUnary();
      if (!rhs)
        return nullptr;
      lhs = binary(op, loc, std::move(lhs), std::move(rhs));
      if (!lhs)
        return nullptr;
    }
    return lhs;
  }

  ExprPtr parseUnary() {
    if (tok.kind == Tok::Minus) {
      Loc loc = tok.loc;
      consume();
      if (++depth > kMaxDepth) {
        error(loc, "expression nested too deeply (more than " +
                       llvm::Twine(kMaxDepth) + " levels)");
        return nullptr;
      }
      ExprPtr x = parseUnary();
      --depth;
      if (!x)
        return nullptr;
      if (x->kind == Expr::Kind::Number) { // fold -literal
        x->number = -x->number;
        x->loc = loc;
        return x;
      }
      auto e = std::make_unique<Expr>(Expr::Kind::Neg, loc);
      e->depth = x->depth + 1;
      e->args.push_back(std::move(x));
      return e;
    }
    return parsePrimary();
  }

  ExprPtr parsePrimary() {
    Loc loc = tok.loc;
    switch (tok.kind) {
    case Tok::Number: {
      auto e = std::make_unique<Expr>(Expr::Kind::Number, loc);
      e->number = tok.number;
      e->isInteger = tok.isInteger;
      e->text = tok.text;
      consume();
      return e;
    }
    case Tok::String: {
      auto e = std::make_unique<Expr>(Expr::Kind::String, loc);
      e->text = tok.text;
      consume();
      return e;
    }
    case Tok::LParen: {
      consume();
      ExprPtr e = parseExpr();
      if (!e || !expect(Tok::RParen, "')'"))
        return nullptr;
      return e;
    }
    case Tok::LBracket: {
      consume();
      auto e = std::make_unique<Expr>(Expr::Kind::List, loc);
      while (tok.kind != Tok::RBracket) {
        ExprPtr item = parseExpr();
        if (!item)
          return nullptr;
        e->args.push_back(std::move(item));
        if (tok.kind == Tok::Comma)
          consume();
        else if (tok.kind != Tok::RBracket)
          return unexpected("',' or ']'"), nullptr;
      }
      consume();
      return checkDepth(std::move(e));
    }
    case Tok::Ident: {
      std::string name = tok.text;
      consume();
      if (tok.kind != Tok::LParen) {
        auto e = std::make_unique<Expr>(Expr::Kind::Name, loc);
        e->text = name;
        return e;
      }
      consume();
      auto e = std::make_unique<Expr>(Expr::Kind::Call, loc);
      e->text = name;
      while (tok.kind != Tok::RParen) {
        if (tok.kind == Tok::Ident && peekTok.kind == Tok::Equal) {
          KeywordArg kw;
          kw.loc = tok.loc;
          kw.name = tok.text;
          consume();
          consume();
          kw.value = parseExpr();
          if (!kw.value)
            return nullptr;
          e->kwargs.push_back(std::move(kw));
        } else {
          if (!e->kwargs.empty())
            return error(tok.loc, "positional argument after a keyword "
                                  "argument"),
                   nullptr;
          ExprPtr a = parseExpr();
          if (!a)
            return nullptr;
          e->args.push_back(std::move(a));
        }
        if (tok.kind == Tok::Comma)
          consume();
        else if (tok.kind != Tok::RParen)
          return unexpected("',' or ')'"), nullptr;
      }
      consume();
      return checkDepth(std::move(e));
    }
    default:
      unexpected("an expression");
      return nullptr;
    }
  }

  Lexer lexer;
  int depth = 0;
  std::string filename;
  mlir::MLIRContext *ctx;
  Token prev, tok, peekTok;
};

} // namespace

std::optional<Program> dtc::dsl::parse(llvm::StringRef source,
                                       llvm::StringRef filename,
                                       mlir::MLIRContext *context) {
  Parser p(source, filename, context);
  return p.parseProgram();
}
