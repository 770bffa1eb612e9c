// Recursive-descent parser with jinja2's operator precedence, lowest first:
// `x if c else y`, or, and, not, comparisons (== != < <= > >= in, not in),
// + -, ~, * / // %, **, unary -, then postfix (.attr, [i], [a:b:c], call)
// and filters / tests (`|f`, `is t`), which bind tighter than arithmetic.
#include <algorithm>
#include <set>

#include "core/error.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_limits.h"

namespace exactly::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_document() {
    std::string end_tag;
    Body body = parse_body({}, end_tag, "");
    return body;
  }

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

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kText: return "text";
      case TokenKind::kVarBegin: return "'{{'";
      case TokenKind::kVarEnd: return "'}}'";
      case TokenKind::kBlockBegin: return "'{%'";
      case TokenKind::kBlockEnd: return "'%}'";
      case TokenKind::kEnd: return "end of template";
      case TokenKind::kString: return "string";
      default: return "'" + t.value + "'";
    }
  }

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

  // ---- statements ----

  static StmtPtr make_stmt(Stmt::Kind kind, Location where) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->where = where;
    return s;
  }

  // Parses until a `{% tag %}` whose name is in `end_tags`; consumes the tag name
  // (the caller reads the rest of that tag) and stores it in `end_tag`.
  Body parse_body(const std::set<std::string>& end_tags, std::string& end_tag, const std::string& opener,
                  Location opened_at = {}) {
    Nested level(*this, peek().where);
    Body body;
    while (true) {
      const Token& t = peek();
      switch (t.kind) {
        case TokenKind::kEnd:
          if (!end_tags.empty()) fail(opened_at, "unclosed '" + opener + "' block (end of template reached)");
          return body;
        case TokenKind::kText: {
          auto s = make_stmt(Stmt::Kind::kText, t.where);
          s->text = next().value;
          body.push_back(std::move(s));
          break;
        }
        case TokenKind::kVarBegin: {
          auto s = make_stmt(Stmt::Kind::kOutput, next().where);
          s->expr = parse_tuple_or_expression();
          expect(TokenKind::kVarEnd, "'}}'");
          body.push_back(std::move(s));
          break;
        }
        case TokenKind::kBlockBegin: {
          const Token& tag = peek(1);
          if (tag.kind == TokenKind::kName && end_tags.count(tag.value)) {
            pos_ += 2;
            end_tag = tag.value;
            return body;
          }
          body.push_back(parse_statement());
          break;
        }
        default: fail(t.where, "unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement() {
    next();  // {%
    const Token& tag = peek();
    if (tag.kind != TokenKind::kName) fail(tag.where, "expected a tag name, found " + describe(tag));
    std::string name = next().value;
    if (name == "if") return parse_if(tag.where);
    if (name == "for") return parse_for(tag.where);
    if (name == "set") return parse_set(tag.where);
    if (name == "macro") return parse_macro(tag.where);
    if (name == "generation") return parse_block(tag.where, "endgeneration");
    if (name == "filter") return parse_filter_block(tag.where);
    if (name == "with") return parse_with(tag.where);
    if (name == "call") return parse_call_block(tag.where);
    if (name == "break" || name == "continue") {
      expect(TokenKind::kBlockEnd, "'%}'");
      return make_stmt(name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, tag.where);
    }
    static const std::set<std::string> kEndTags = {"endif",    "elif",          "else",     "endfor",
                                                   "endset",   "endmacro",      "endfilter", "endgeneration",
                                                   "endraw",   "endwith",       "endcall"};
    if (kEndTags.count(name)) fail(tag.where, "unexpected '" + name + "' (no open block takes it)");
    fail(tag.where, "unknown tag '" + name + "'");
  }

  StmtPtr parse_if(Location where) {
    auto s = make_stmt(Stmt::Kind::kIf, where);
    std::string end_tag = "elif";
    while (end_tag == "elif") {
      s->conditions.push_back(parse_tuple_or_expression());
      expect(TokenKind::kBlockEnd, "'%}'");
      s->branches.push_back(parse_body({"elif", "else", "endif"}, end_tag, "if", where));
    }
    if (end_tag == "else") {
      expect(TokenKind::kBlockEnd, "'%}'");
      s->branches.push_back(parse_body({"endif"}, end_tag, "if", where));
    }
    expect(TokenKind::kBlockEnd, "'%}'");
    return s;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names{expect_name("a variable name")};
    while (skip_operator(",")) names.push_back(expect_name("a variable name"));
    return names;
  }

  StmtPtr parse_for(Location where) {
    auto s = make_stmt(Stmt::Kind::kFor, where);
    s->targets = parse_targets();
    if (!skip_name("in")) fail(peek().where, "expected 'in' in for loop, found " + describe(peek()));
    s->expr = parse_or();
    if (skip_name("if")) s->loop_filter = parse_expression();
    s->recursive = skip_name("recursive");
    expect(TokenKind::kBlockEnd, "'%}'");
    std::string end_tag;
    s->body = parse_body({"else", "endfor"}, end_tag, "for", where);
    if (end_tag == "else") {
      expect(TokenKind::kBlockEnd, "'%}'");
      s->else_body = parse_body({"endfor"}, end_tag, "for", where);
    }
    expect(TokenKind::kBlockEnd, "'%}'");
    return s;
  }

  StmtPtr parse_set(Location where) {
    auto s = make_stmt(Stmt::Kind::kSet, where);
    s->targets = parse_targets();
    if (s->targets.size() == 1 && skip_operator(".")) s->target_attribute = expect_name("an attribute name");
    if (skip_operator("=")) {
      s->expr = parse_tuple_or_expression();
      expect(TokenKind::kBlockEnd, "'%}'");
      return s;
    }
    if (s->targets.size() != 1) fail(peek().where, "expected '=' in set");
    expect(TokenKind::kBlockEnd, "'%}'");
    s->kind = Stmt::Kind::kSetBlock;
    std::string end_tag;
    s->body = parse_body({"endset"}, end_tag, "set", where);
    expect(TokenKind::kBlockEnd, "'%}'");
    return s;
  }

  // `{% generation %}`: transformers marks the assistant's tokens with it; the text is the body's.
  StmtPtr parse_block(Location where, const std::string& end) {
    auto s = make_stmt(Stmt::Kind::kBlock, where);
    expect(TokenKind::kBlockEnd, "'%}'");
    std::string end_tag;
    s->body = parse_body({end}, end_tag, where_name(end), where);
    expect(TokenKind::kBlockEnd, "'%}'");
    return s;
  }

  static std::string where_name(const std::string& end_tag) { return end_tag.substr(3); }

  // `{% filter f(args) | g %}body{% endfilter %}`: the chain over the rendered body.
  StmtPtr parse_filter_block(Location where) {
    auto s = make_stmt(Stmt::Kind::kFilterBlock, where);
    ExprPtr chain = make(Expr::Kind::kName, where);
    chain->name = kFilterBodyName;
    do {
      Location at = peek().where;
      chain = parse_call(std::move(chain), Expr::Kind::kFilter, expect_name("a filter name"));
      chain->where = at;
    } while (skip_operator("|"));
    s->expr = std::move(chain);
    expect(TokenKind::kBlockEnd, "'%}'");
    std::string end_tag;
    s->body = parse_body({"endfilter"}, end_tag, "filter", where);
    expect(TokenKind::kBlockEnd, "'%}'");
    return s;
  }

  // `{% with a = x, b = y %}body{% endwith %}`.
  StmtPtr parse_with(Location where) {
    auto s = make_stmt(Stmt::Kind::kWith, where);
    while (!at_block_end()) {
      s->targets.push_back(expect_name("a variable name"));
      expect_operator("=");
      s->values.push_back(parse_expression());
      if (!skip_operator(",")) break;
    }
    expect(TokenKind::kBlockEnd, "'%}'");
    std::string end_tag;
    s->body = parse_body({"endwith"}, end_tag, "with", where);
    expect(TokenKind::kBlockEnd, "'%}'");
    return s;
  }

  bool at_block_end() const { return peek().kind == TokenKind::kBlockEnd; }

  StmtPtr parse_macro(Location where) {
    auto s = make_stmt(Stmt::Kind::kMacro, where);
    s->name = expect_name("a macro name");
    expect_operator("(");
    parse_params(*s);
    expect(TokenKind::kBlockEnd, "'%}'");
    std::string end_tag;
    s->body = parse_body({"endmacro"}, end_tag, "macro", where);
    expect(TokenKind::kBlockEnd, "'%}'");
    find_special_names(*s);
    s->takes_caller = mentions(s->body, "caller");
    return s;
  }

  // `(a, b=default)` after the opening parenthesis.
  void parse_params(Stmt& s) {
    while (!at_operator(")")) {
      s.params.push_back(expect_name("a parameter name"));
      s.defaults.push_back(skip_operator("=") ? parse_expression() : nullptr);
      if (!skip_operator(",")) break;
    }
    expect_operator(")");
  }

  // As jinja2 decides: a macro takes extra arguments only where its body reads them.
  static void find_special_names(Stmt& s) {
    s.takes_varargs = mentions(s.body, "varargs");
    s.takes_kwargs = mentions(s.body, "kwargs");
  }

  // `{% call(params) f(args) %}body{% endcall %}`.
  StmtPtr parse_call_block(Location where) {
    auto s = make_stmt(Stmt::Kind::kCallBlock, where);
    if (skip_operator("(")) parse_params(*s);
    Location at = peek().where;
    s->expr = parse_expression();
    if (s->expr->kind != Expr::Kind::kCall) fail(at, "expected a call after 'call'");
    expect(TokenKind::kBlockEnd, "'%}'");
    std::string end_tag;
    s->body = parse_body({"endcall"}, end_tag, "call", where);
    expect(TokenKind::kBlockEnd, "'%}'");
    find_special_names(*s);
    return s;
  }

  // Whether any expression in the body (nested macros' bodies aside) reads `name`.
  static bool mentions(const Body& body, const std::string& name) {
    return std::any_of(body.begin(), body.end(), [&](const StmtPtr& s) { return mentions(*s, name); });
  }
  static bool mentions(const Stmt& s, const std::string& name) {
    if (s.kind == Stmt::Kind::kMacro) return false;
    auto in = [&](const ExprPtr& e) { return e && mentions(*e, name); };
    return in(s.expr) || in(s.loop_filter) || std::any_of(s.conditions.begin(), s.conditions.end(), in) ||
           std::any_of(s.values.begin(), s.values.end(), in) ||
           std::any_of(s.branches.begin(), s.branches.end(), [&](const Body& b) { return mentions(b, name); }) ||
           mentions(s.body, name) || mentions(s.else_body, name);
  }
  static bool mentions(const Expr& e, const std::string& name) {
    if (e.kind == Expr::Kind::kName && e.name == name) return true;
    return std::any_of(e.children.begin(), e.children.end(), [&](const ExprPtr& c) { return c && mentions(*c, name); });
  }

  // ---- expressions ----

  ExprPtr make(Expr::Kind kind, Location where) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->where = where;
    return e;
  }

  // Sets a node's height once its children are attached. Chains such as
  // `a + b + c + ...` or `x|f|f|...` grow the tree without recursing here,
  // but evaluating and freeing it recurse once per level, so the height is
  // bounded too.
  ExprPtr finish(ExprPtr e) {
    int tallest = 0;
    for (const ExprPtr& c : e->children)
      if (c) tallest = std::max(tallest, c->height);
    if (tallest >= kMaxParseDepth)
      fail(e->where, "expressions nest more than " + std::to_string(kMaxParseDepth) + " deep");
    e->height = tallest + 1;
    return e;
  }

  // `a, b` at the top of `{{ }}` or a `set` value is a tuple.
  ExprPtr parse_tuple_or_expression() {
    Location where = peek().where;
    ExprPtr first = parse_expression();
    if (!at_operator(",")) return first;
    auto tuple = make(Expr::Kind::kTuple, where);
    tuple->children.push_back(std::move(first));
    while (skip_operator(",")) tuple->children.push_back(parse_expression());
    return finish(std::move(tuple));
  }

  ExprPtr parse_expression() {
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

  ExprPtr binary(Expr::Kind kind, Location where, ExprPtr lhs, ExprPtr rhs, std::string op = {}) {
    auto e = make(kind, where);
    e->name = std::move(op);
    e->children.push_back(std::move(lhs));
    e->children.push_back(std::move(rhs));
    return finish(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr lhs = parse_and();
    while (at_name("or")) {
      Location where = next().where;
      lhs = binary(Expr::Kind::kOr, where, std::move(lhs), parse_and());
    }
    return lhs;
  }

  ExprPtr parse_and() {
    ExprPtr lhs = parse_not();
    while (at_name("and")) {
      Location where = next().where;
      lhs = binary(Expr::Kind::kAnd, where, std::move(lhs), parse_not());
    }
    return lhs;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      Nested level(*this, peek().where);
      auto e = make(Expr::Kind::kNot, next().where);
      e->children.push_back(parse_not());
      return finish(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr lhs = parse_concat();
    while (at_operator("+") || at_operator("-")) {
      const Token& op = next();
      lhs = binary(Expr::Kind::kBinary, op.where, std::move(lhs), parse_concat(), op.value);
    }
    return lhs;
  }

  ExprPtr parse_concat() {
    ExprPtr lhs = parse_math2();
    while (at_operator("~")) {
      const Token& op = next();
      lhs = binary(Expr::Kind::kBinary, op.where, std::move(lhs), parse_math2(), "~");
    }
    return lhs;
  }

  ExprPtr parse_math2() {
    ExprPtr lhs = parse_pow();
    while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
      const Token& op = next();
      lhs = binary(Expr::Kind::kBinary, op.where, std::move(lhs), parse_pow(), op.value);
    }
    return lhs;
  }

  ExprPtr parse_pow() {
    ExprPtr lhs = parse_unary(true);
    while (at_operator("**")) {
      const Token& op = next();
      lhs = binary(Expr::Kind::kBinary, op.where, std::move(lhs), parse_unary(true), "**");
    }
    return lhs;
  }

  ExprPtr parse_unary(bool with_filters) {
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

  ExprPtr parse_primary() {
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

  Value int_literal(const Token& t) const {
    try {
      return Value::from_int(std::stoll(t.value));
    } catch (const std::exception&) {
      fail(t.where, "number out of range: " + t.value);
    }
  }

  Value float_literal(const Token& t) const {
    try {
      return Value::from_float(std::stod(t.value));
    } catch (const std::exception&) {
      fail(t.where, "number out of range: " + t.value);
    }
  }

  ExprPtr parse_parenthesized() {
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

  ExprPtr parse_list() {
    auto e = make(Expr::Kind::kList, next().where);
    while (!at_operator("]")) {
      e->children.push_back(parse_expression());
      if (!skip_operator(",")) break;
    }
    expect_operator("]");
    return finish(std::move(e));
  }

  ExprPtr parse_dict() {
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

  ExprPtr parse_postfix(ExprPtr node) {
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

  ExprPtr parse_subscript(ExprPtr node) {
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
  ExprPtr parse_call(ExprPtr callee, Expr::Kind kind, const std::string& name) {
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

  ExprPtr parse_filters_and_tests(ExprPtr node) {
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

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;  // levels of nesting being parsed
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(lex_template(source)).parse_document(); }

}  // namespace exactly::jinja
