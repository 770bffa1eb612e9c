// Template parser, expressions: recursive descent with jinja2's operator
// precedence, lowest first:
// `x if c else y`, or, and, not, comparisons (== != < <= > >= in, not in),
// + -, ~, * / // %, **, unary -, then postfix (.attr, [i], [a:b:c], call)
// and filters / tests (`|f`, `is t`), which bind tighter than arithmetic.
#include <algorithm>
#include <string>

#include "tokenizer/jinja_parser_impl.h"

namespace exactly::jinja::detail {

ExprPtr Parser::make(Expr::Kind kind, Location where) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->where = where;
  return e;
}

// Sets a node's height once its children are attached. Chains such as
// `a + b + c + ...` or `x|f|f|...` grow the tree without recursing here,
// but evaluating and freeing it recurse once per level, so the height is
// bounded too.
ExprPtr Parser::finish(ExprPtr e) {
  int tallest = 0;
  for (const ExprPtr& c : e->children)
    if (c) tallest = std::max(tallest, c->height);
  if (tallest >= kMaxParseDepth)
    fail(e->where, "expressions nest more than " + std::to_string(kMaxParseDepth) + " deep");
  e->height = tallest + 1;
  return e;
}

// `a, b` at the top of `{{ }}` or a `set` value is a tuple.
ExprPtr Parser::parse_tuple_or_expression() {
  Location where = peek().where;
  ExprPtr first = parse_expression();
  if (!at_operator(",")) return first;
  auto tuple = make(Expr::Kind::kTuple, where);
  tuple->children.push_back(std::move(first));
  while (skip_operator(",")) tuple->children.push_back(parse_expression());
  return finish(std::move(tuple));
}

ExprPtr Parser::parse_expression() {
  Nested level(*this, peek().where);
  ExprPtr value = parse_or();
  while (at_name("if")) {
    auto e = make(Expr::Kind::kConditional, next().where);
    ExprPtr condition = parse_or();
    ExprPtr otherwise = skip_name("else") ? parse_expression() : nullptr;
    e->children.push_back(std::move(condition));
    e->children.push_back(std::move(value));
    e->children.push_back(std::move(otherwise));
    value = finish(std::move(e));
  }
  return value;
}

ExprPtr Parser::binary(Expr::Kind kind, Location where, ExprPtr lhs, ExprPtr rhs, std::string op) {
  auto e = make(kind, where);
  e->name = std::move(op);
  e->children.push_back(std::move(lhs));
  e->children.push_back(std::move(rhs));
  return finish(std::move(e));
}

ExprPtr Parser::parse_or() {
  ExprPtr lhs = parse_and();
  while (at_name("or")) {
    Location where = next().where;
    lhs = binary(Expr::Kind::kOr, where, std::move(lhs), parse_and());
  }
  return lhs;
}

ExprPtr Parser::parse_and() {
  ExprPtr lhs = parse_not();
  while (at_name("and")) {
    Location where = next().where;
    lhs = binary(Expr::Kind::kAnd, where, std::move(lhs), parse_not());
  }
  return lhs;
}

ExprPtr Parser::parse_not() {
  if (at_name("not")) {
    Nested level(*this, peek().where);
    auto e = make(Expr::Kind::kNot, next().where);
    e->children.push_back(parse_not());
    return finish(std::move(e));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  Location where = peek().where;
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (peek().kind == TokenKind::kOperator &&
        (peek().value == "==" || peek().value == "!=" || peek().value == "<" || peek().value == "<=" ||
         peek().value == ">" || peek().value == ">=")) {
      op = next().value;
    } else if (skip_name("in")) {
      op = "in";
    } else if (at_name("not") && peek(1).kind == TokenKind::kName && peek(1).value == "in") {
      pos_ += 2;
      op = "not in";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(Expr::Kind::kCompare, where);
      cmp->children.push_back(std::move(first));
    }
    cmp->compare_ops.push_back(op);
    cmp->children.push_back(parse_math1());
  }
  return cmp ? finish(std::move(cmp)) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  ExprPtr lhs = parse_concat();
  while (at_operator("+") || at_operator("-")) {
    const Token& op = next();
    lhs = binary(Expr::Kind::kBinary, op.where, std::move(lhs), parse_concat(), op.value);
  }
  return lhs;
}

ExprPtr Parser::parse_concat() {
  ExprPtr lhs = parse_math2();
  while (at_operator("~")) {
    const Token& op = next();
    lhs = binary(Expr::Kind::kBinary, op.where, std::move(lhs), parse_math2(), "~");
  }
  return lhs;
}

ExprPtr Parser::parse_math2() {
  ExprPtr lhs = parse_pow();
  while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
    const Token& op = next();
    lhs = binary(Expr::Kind::kBinary, op.where, std::move(lhs), parse_pow(), op.value);
  }
  return lhs;
}

ExprPtr Parser::parse_pow() {
  ExprPtr lhs = parse_unary(true);
  while (at_operator("**")) {
    const Token& op = next();
    lhs = binary(Expr::Kind::kBinary, op.where, std::move(lhs), parse_unary(true), "**");
  }
  return lhs;
}

ExprPtr Parser::parse_unary(bool with_filters) {
  ExprPtr node;
  if (at_operator("-") || at_operator("+")) {
    Nested level(*this, peek().where);
    bool negate = peek().value == "-";
    Location where = next().where;
    node = parse_unary(false);
    if (negate) {
      auto e = make(Expr::Kind::kNegate, where);
      e->children.push_back(std::move(node));
      node = finish(std::move(e));
    }
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  return with_filters ? parse_filters_and_tests(std::move(node)) : std::move(node);
}

ExprPtr Parser::parse_primary() {
  const Token& t = peek();
  switch (t.kind) {
    case TokenKind::kName: {
      next();
      auto e = make(Expr::Kind::kLiteral, t.where);
      if (t.value == "true" || t.value == "True") e->literal = Value::from_bool(true);
      else if (t.value == "false" || t.value == "False") e->literal = Value::from_bool(false);
      else if (t.value == "none" || t.value == "None") e->literal = Value::none();
      else {
        e->kind = Expr::Kind::kName;
        e->name = t.value;
      }
      return e;
    }
    case TokenKind::kString: {
      auto e = make(Expr::Kind::kLiteral, t.where);
      std::string text;
      while (peek().kind == TokenKind::kString) text += next().value;  // adjacent strings join
      e->literal = Value::from_string(std::move(text));
      return e;
    }
    case TokenKind::kInt:
    case TokenKind::kFloat: {
      next();
      auto e = make(Expr::Kind::kLiteral, t.where);
      e->literal = t.kind == TokenKind::kInt ? int_literal(t) : float_literal(t);
      return e;
    }
    case TokenKind::kOperator:
      if (t.value == "(") return parse_parenthesized();
      if (t.value == "[") return parse_list();
      if (t.value == "{") return parse_dict();
      [[fallthrough]];
    default: fail(t.where, "unexpected " + describe(t) + " in expression");
  }
}

Value Parser::int_literal(const Token& t) const {
  try {
    return Value::from_int(std::stoll(t.value));
  } catch (const std::exception&) {
    fail(t.where, "number out of range: " + t.value);
  }
}

Value Parser::float_literal(const Token& t) const {
  try {
    return Value::from_float(std::stod(t.value));
  } catch (const std::exception&) {
    fail(t.where, "number out of range: " + t.value);
  }
}

ExprPtr Parser::parse_parenthesized() {
  Location where = next().where;
  if (skip_operator(")")) return make(Expr::Kind::kTuple, where);
  ExprPtr first = parse_expression();
  if (skip_operator(")")) return first;
  auto tuple = make(Expr::Kind::kTuple, where);
  tuple->children.push_back(std::move(first));
  while (skip_operator(",")) {
    if (at_operator(")")) break;
    tuple->children.push_back(parse_expression());
  }
  expect_operator(")");
  return finish(std::move(tuple));
}

ExprPtr Parser::parse_list() {
  auto e = make(Expr::Kind::kList, next().where);
  while (!at_operator("]")) {
    e->children.push_back(parse_expression());
    if (!skip_operator(",")) break;
  }
  expect_operator("]");
  return finish(std::move(e));
}

ExprPtr Parser::parse_dict() {
  auto e = make(Expr::Kind::kDict, next().where);
  while (!at_operator("}")) {
    e->children.push_back(parse_expression());
    expect_operator(":");
    e->children.push_back(parse_expression());
    if (!skip_operator(",")) break;
  }
  expect_operator("}");
  return finish(std::move(e));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_operator(".")) {
      Location where = next().where;
      auto e = make(Expr::Kind::kAttribute, where);
      if (peek().kind == TokenKind::kInt) e->kind = Expr::Kind::kSubscript;  // x.0 is x[0]
      if (e->kind == Expr::Kind::kSubscript) {
        auto index = make(Expr::Kind::kLiteral, peek().where);
        index->literal = int_literal(next());
        e->children.push_back(std::move(node));
        e->children.push_back(std::move(index));
      } else {
        e->name = expect_name("an attribute name");
        e->children.push_back(std::move(node));
      }
      node = finish(std::move(e));
    } else if (at_operator("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_operator("(")) {
      node = parse_call(std::move(node), Expr::Kind::kCall, "");
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  Location where = next().where;
  ExprPtr parts[3];
  int colons = 0;
  while (true) {
    if (!at_operator(":") && !at_operator("]")) parts[colons] = parse_expression();
    if (colons < 2 && skip_operator(":")) {
      ++colons;
      continue;
    }
    break;
  }
  expect_operator("]");
  auto e = make(colons ? Expr::Kind::kSlice : Expr::Kind::kSubscript, where);
  e->children.push_back(std::move(node));
  if (!colons && !parts[0]) fail(where, "empty subscript");
  for (int i = 0; i < (colons ? 3 : 1); ++i) e->children.push_back(std::move(parts[i]));
  return finish(std::move(e));
}

// Parses `(args, name=value)` after `callee` (kCall) or after a filter name.
ExprPtr Parser::parse_call(ExprPtr callee, Expr::Kind kind, const std::string& name) {
  auto e = make(kind, peek().where);
  e->name = name;
  e->children.push_back(std::move(callee));
  if (!skip_operator("(")) return finish(std::move(e));
  std::vector<ExprPtr> keywords;
  while (!at_operator(")")) {
    if (peek().kind == TokenKind::kName && peek(1).kind == TokenKind::kOperator && peek(1).value == "=") {
      e->keyword_names.push_back(next().value);
      next();
      keywords.push_back(parse_expression());
    } else {
      if (!keywords.empty()) fail(peek().where, "positional argument after keyword argument");
      e->children.push_back(parse_expression());
    }
    if (!skip_operator(",")) break;
  }
  expect_operator(")");
  for (auto& k : keywords) e->children.push_back(std::move(k));
  return finish(std::move(e));
}

ExprPtr Parser::parse_filters_and_tests(ExprPtr node) {
  while (true) {
    if (at_operator("|")) {
      next();
      Location where = peek().where;
      std::string name = expect_name("a filter name");
      node = parse_call(std::move(node), Expr::Kind::kFilter, name);
      node->where = where;
    } else if (at_name("is")) {
      next();
      bool negated = skip_name("not");
      Location where = peek().where;
      std::string name = expect_name("a test name");
      if (at_operator("(")) {
        node = parse_call(std::move(node), Expr::Kind::kTest, name);
      } else {
        auto e = make(Expr::Kind::kTest, where);
        e->name = name;
        e->children.push_back(std::move(node));
        // `is divisibleby 3`, `is sameas none`: one argument without parentheses.
        const Token& t = peek();
        bool takes_argument = t.kind == TokenKind::kString || t.kind == TokenKind::kInt ||
                              t.kind == TokenKind::kFloat ||
                              (t.kind == TokenKind::kOperator && (t.value == "[" || t.value == "{")) ||
                              (t.kind == TokenKind::kName && t.value != "else" && t.value != "or" &&
                               t.value != "and" && t.value != "if" && t.value != "is" && t.value != "in" &&
                               t.value != "not");
        if (takes_argument) e->children.push_back(parse_postfix(parse_primary()));
        node = finish(std::move(e));
      }
      node->negated = negated;
      node->where = where;
    } else if (at_operator("(")) {
      node = parse_call(std::move(node), Expr::Kind::kCall, "");
    } else {
      return node;
    }
  }
}

}  // namespace exactly::jinja::detail
