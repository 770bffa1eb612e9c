// Splits a Jinja template into text and tag tokens, applying whitespace control
// the way Hugging Face configures jinja2 for chat templates:
// trim_blocks=True (the newline after `%}` / `#}` is dropped), lstrip_blocks=True
// (spaces before `{%` / `{#` on their own line are dropped), `-` on a tag strips
// all whitespace on that side, `+` disables trimming, and one trailing newline
// of the template is removed (keep_trailing_newline=False).
#pragma once

#include <string>
#include <vector>

namespace exactly::jinja {

struct Location {
  int line = 1;
  int column = 1;
};

enum class TokenKind {
  kText,        // literal output
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // value holds the unescaped text
  kInt,
  kFloat,
  kOperator,    // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEnd,         // end of the template
};

struct Token {
  TokenKind kind;
  std::string value;
  Location where;
};

// Throws exactly::Error naming the line and column of an unterminated tag,
// string or comment, or a character that cannot start a token.
std::vector<Token> lex_template(const std::string& source);

// Formats "chat template line L, column C: message".
std::string located(const Location& where, const std::string& message);

}  // namespace exactly::jinja
