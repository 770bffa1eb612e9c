// Template parser, documents and statements: text, `{{ }}` output and the
// `{% %}` tags (if, for, set, macro, filter, with, call, generation). The
// expressions inside them are parsed in jinja_parse_expr.cc.
#include <algorithm>
#include <set>

#include "tokenizer/jinja_parser_impl.h"

namespace exactly::jinja {
namespace detail {

Body Parser::parse_document() {
  std::string end_tag;
  Body body = parse_body({}, end_tag, "");
  return body;
}

std::string Parser::describe(const Token& t) {
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

StmtPtr Parser::make_stmt(Stmt::Kind kind, Location where) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->where = where;
  return s;
}

// Parses until a `{% tag %}` whose name is in `end_tags`; consumes the tag name
// (the caller reads the rest of that tag) and stores it in `end_tag`.
Body Parser::parse_body(const std::set<std::string>& end_tags, std::string& end_tag, const std::string& opener,
                              Location opened_at) {
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

StmtPtr Parser::parse_statement() {
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

StmtPtr Parser::parse_if(Location where) {
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

std::vector<std::string> Parser::parse_targets() {
  std::vector<std::string> names{expect_name("a variable name")};
  while (skip_operator(",")) names.push_back(expect_name("a variable name"));
  return names;
}

StmtPtr Parser::parse_for(Location where) {
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

StmtPtr Parser::parse_set(Location where) {
  auto s = make_stmt(Stmt::Kind::kSet, where);
  s->targets = parse_targets();
  if (s->targets.size() == 1 && skip_operator(".")) s->target_attribute = expect_name("an attribute name");
  if (skip_operator("=")) {
    s->expr = parse_tuple_or_expression();
    expect(TokenKind::kBlockEnd, "'%}'");
    return s;
  }
  if (s->targets.size() != 1) fail(peek().where, "expected '=' in set");
  s->kind = Stmt::Kind::kSetBlock;
  s->body = body_until("endset", where);
  return s;
}

// `{% generation %}`: transformers marks the assistant's tokens with it; the text is the body's.
StmtPtr Parser::parse_block(Location where, const std::string& end) {
  auto s = make_stmt(Stmt::Kind::kBlock, where);
  s->body = body_until(end, where);
  return s;
}

// The rest of an opening tag (its `%}`), the body up to `{% end %}`, and that tag's `%}`.
Body Parser::body_until(const std::string& end, Location where) {
  expect(TokenKind::kBlockEnd, "'%}'");
  std::string end_tag;
  Body body = parse_body({end}, end_tag, where_name(end), where);
  expect(TokenKind::kBlockEnd, "'%}'");
  return body;
}


// `{% filter f(args) | g %}body{% endfilter %}`: the chain over the rendered body.
StmtPtr Parser::parse_filter_block(Location where) {
  auto s = make_stmt(Stmt::Kind::kFilterBlock, where);
  ExprPtr chain = make(Expr::Kind::kName, where);
  chain->name = kFilterBodyName;
  do {
    Location at = peek().where;
    chain = parse_call(std::move(chain), Expr::Kind::kFilter, expect_name("a filter name"));
    chain->where = at;
  } while (skip_operator("|"));
  s->expr = std::move(chain);
  s->body = body_until("endfilter", where);
  return s;
}

// `{% with a = x, b = y %}body{% endwith %}`.
StmtPtr Parser::parse_with(Location where) {
  auto s = make_stmt(Stmt::Kind::kWith, where);
  while (!at_block_end()) {
    s->targets.push_back(expect_name("a variable name"));
    expect_operator("=");
    s->values.push_back(parse_expression());
    if (!skip_operator(",")) break;
  }
  s->body = body_until("endwith", where);
  return s;
}

StmtPtr Parser::parse_macro(Location where) {
  auto s = make_stmt(Stmt::Kind::kMacro, where);
  s->name = expect_name("a macro name");
  expect_operator("(");
  parse_params(*s);
  s->body = body_until("endmacro", where);
  find_special_names(*s);
  s->takes_caller = mentions(s->body, "caller");
  return s;
}

// `(a, b=default)` after the opening parenthesis.
void Parser::parse_params(Stmt& s) {
  while (!at_operator(")")) {
    s.params.push_back(expect_name("a parameter name"));
    s.defaults.push_back(skip_operator("=") ? parse_expression() : nullptr);
    if (!skip_operator(",")) break;
  }
  expect_operator(")");
}

// As jinja2 decides: a macro takes extra arguments only where its body reads them.
void Parser::find_special_names(Stmt& s) {
  s.takes_varargs = mentions(s.body, "varargs");
  s.takes_kwargs = mentions(s.body, "kwargs");
}

// `{% call(params) f(args) %}body{% endcall %}`.
StmtPtr Parser::parse_call_block(Location where) {
  auto s = make_stmt(Stmt::Kind::kCallBlock, where);
  if (skip_operator("(")) parse_params(*s);
  Location at = peek().where;
  s->expr = parse_expression();
  if (s->expr->kind != Expr::Kind::kCall) fail(at, "expected a call after 'call'");
  s->body = body_until("endcall", where);
  find_special_names(*s);
  return s;
}

// Whether any expression in the body (nested macros' bodies aside) reads `name`.
bool Parser::mentions(const Body& body, const std::string& name) {
  return std::any_of(body.begin(), body.end(), [&](const StmtPtr& s) { return mentions(*s, name); });
}
bool Parser::mentions(const Stmt& s, const std::string& name) {
  if (s.kind == Stmt::Kind::kMacro) return false;
  auto in = [&](const ExprPtr& e) { return e && mentions(*e, name); };
  return in(s.expr) || in(s.loop_filter) || std::any_of(s.conditions.begin(), s.conditions.end(), in) ||
         std::any_of(s.values.begin(), s.values.end(), in) ||
         std::any_of(s.branches.begin(), s.branches.end(), [&](const Body& b) { return mentions(b, name); }) ||
         mentions(s.body, name) || mentions(s.else_body, name);
}
bool Parser::mentions(const Expr& e, const std::string& name) {
  if (e.kind == Expr::Kind::kName && e.name == name) return true;
  return std::any_of(e.children.begin(), e.children.end(), [&](const ExprPtr& c) { return c && mentions(*c, name); });
}

}  // namespace detail

Body parse_template(const std::string& source) { return detail::Parser(lex_template(source)).parse_document(); }

}  // namespace exactly::jinja
