// The template parser's class, shared by its two halves: jinja_parser.cc
// (the document and its statements) and jinja_parse_expr.cc (expressions).
// Internal to src/tokenizer/; the public entry point is parse_template in
// jinja_ast.h.
#pragma once

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_limits.h"

namespace exactly::jinja::detail {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_document();

 private:
  // One level of nesting (a block, a parenthesised or bracketed expression,
  // a unary operator) for as long as it lives: the parser recurses once per
  // level, so the template's text may not decide the depth.
  class Nested {
   public:
    Nested(Parser& p, const Location& where) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) p_.fail(where, "expressions and blocks nest more than " +
                                                           std::to_string(kMaxParseDepth) + " deep");
    }
    ~Nested() { --p_.depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    Parser& p_;
  };

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }

  [[noreturn]] void fail(const Location& where, const std::string& message) const {
    throw Error(located(where, message), ExitCode::kBadInput);
  }

  static std::string describe(const Token& t);

  bool at_operator(const char* op) const { return peek().kind == TokenKind::kOperator && peek().value == op; }
  bool at_name(const char* name) const { return peek().kind == TokenKind::kName && peek().value == name; }
  bool skip_operator(const char* op) {
    if (!at_operator(op)) return false;
    ++pos_;
    return true;
  }
  bool skip_name(const char* name) {
    if (!at_name(name)) return false;
    ++pos_;
    return true;
  }
  void expect_operator(const char* op) {
    if (!skip_operator(op)) fail(peek().where, std::string("expected '") + op + "', found " + describe(peek()));
  }
  void expect(TokenKind kind, const char* what) {
    if (peek().kind != kind) fail(peek().where, std::string("expected ") + what + ", found " + describe(peek()));
    ++pos_;
  }
  std::string expect_name(const char* what) {
    if (peek().kind != TokenKind::kName) fail(peek().where, std::string("expected ") + what + ", found " + describe(peek()));
    return next().value;
  }
  bool at_block_end() const { return peek().kind == TokenKind::kBlockEnd; }

  // ---- statements (jinja_parser.cc) ----

  static StmtPtr make_stmt(Stmt::Kind kind, Location where);
  Body parse_body(const std::set<std::string>& end_tags, std::string& end_tag, const std::string& opener,
                  Location opened_at = {});
  StmtPtr parse_statement();
  StmtPtr parse_if(Location where);
  std::vector<std::string> parse_targets();
  StmtPtr parse_for(Location where);
  StmtPtr parse_set(Location where);
  StmtPtr parse_block(Location where, const std::string& end);
  Body body_until(const std::string& end, Location where);
  static std::string where_name(const std::string& end_tag) { return end_tag.substr(3); }
  StmtPtr parse_filter_block(Location where);
  StmtPtr parse_with(Location where);
  StmtPtr parse_macro(Location where);
  void parse_params(Stmt& s);
  static void find_special_names(Stmt& s);
  StmtPtr parse_call_block(Location where);
  static bool mentions(const Body& body, const std::string& name);
  static bool mentions(const Stmt& s, const std::string& name);
  static bool mentions(const Expr& e, const std::string& name);

  // ---- expressions (jinja_parse_expr.cc) ----

  ExprPtr make(Expr::Kind kind, Location where);
  ExprPtr finish(ExprPtr e);
  ExprPtr parse_tuple_or_expression();
  ExprPtr parse_expression();
  ExprPtr binary(Expr::Kind kind, Location where, ExprPtr lhs, ExprPtr rhs, std::string op = {});
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filters);
  ExprPtr parse_primary();
  Value int_literal(const Token& t) const;
  Value float_literal(const Token& t) const;
  ExprPtr parse_parenthesized();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_call(ExprPtr callee, Expr::Kind kind, const std::string& name);
  ExprPtr parse_filters_and_tests(ExprPtr node);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;  // levels of nesting being parsed
};

}  // namespace exactly::jinja::detail
