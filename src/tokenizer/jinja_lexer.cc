#include "tokenizer/jinja_lexer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "tokenizer/jinja_value.h"

namespace exactly::jinja {

std::string located(const Location& where, const std::string& message) {
  return "chat template line " + std::to_string(where.line) + ", column " + std::to_string(where.column) + ": " +
         message;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// jinja2 turns every newline sequence of the template into "\n" and, without
// keep_trailing_newline, drops one final newline.
std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(normalize_newlines(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) pos = lex_text_and_tag(pos);
    tokens_.push_back({TokenKind::kEnd, "", where(src_.size())});
    return std::move(tokens_);
  }

 private:
  Location where(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    return {static_cast<int>(it - line_starts_.begin()) + 1, static_cast<int>(offset - *it) + 1};
  }

  [[noreturn]] void fail(size_t offset, const std::string& message) const {
    throw Error(located(where(offset), message), ExitCode::kBadInput);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && std::strchr("{%#", src_[i + 1]) && src_[i + 1] != '\0') return i;
    return std::string::npos;
  }

  size_t skip_spaces(size_t pos) const {
    while (pos < src_.size() && is_space(src_[pos])) ++pos;
    return pos;
  }

  // Lexes the text starting at `pos` and the tag after it; returns where to continue.
  size_t lex_text_and_tag(size_t pos) {
    size_t tag = find_tag(pos);
    std::string text = src_.substr(pos, tag == std::string::npos ? std::string::npos : tag - pos);
    if (tag == std::string::npos) {
      emit_text(std::move(text), pos);
      return src_.size();
    }
    char type = src_[tag + 1];
    size_t body = tag + 2;
    char modifier = body < src_.size() && (src_[body] == '-' || src_[body] == '+') ? src_[body] : '\0';
    if (modifier) ++body;
    if (modifier == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (modifier != '+' && type != '{') {
      // lstrip_blocks: a block or comment tag alone on its line takes the indentation with it.
      bool line_starting = pos == 0 || src_[pos - 1] == '\n';
      size_t line_begin = text.rfind('\n');
      line_begin = line_begin == std::string::npos ? 0 : line_begin + 1;
      bool only_spaces = line_begin < text.size() &&
                         std::all_of(text.begin() + static_cast<long>(line_begin), text.end(), is_space);
      if ((line_begin > 0 || line_starting) && only_spaces) text.resize(line_begin);
    }
    emit_text(std::move(text), pos);
    if (type == '#') return lex_comment(tag, body);
    const size_t next = lex_tag(tag, body, type == '%');
    return opened_raw() ? lex_raw(tag, next) : next;
  }

  // Whether the tag just lexed is `{% raw %}`.
  bool opened_raw() const {
    const size_t n = tokens_.size();
    return n >= 3 && tokens_[n - 3].kind == TokenKind::kBlockBegin && tokens_[n - 2].kind == TokenKind::kName &&
           tokens_[n - 2].value == "raw" && tokens_[n - 1].kind == TokenKind::kBlockEnd;
  }

  // The text up to `{% endraw %}` as it stands (its own whitespace control and
  // lstrip_blocks apply at the end tag); returns where to continue.
  size_t lex_raw(size_t tag, size_t pos) {
    tokens_.resize(tokens_.size() - 3);
    // trim_blocks does not apply to `{% raw %}`: the text starts right after it (but for `-%}`).
    const size_t tag_end = src_.rfind("%}", pos - 1);
    if (tag_end > 0 && src_[tag_end - 1] != '-') pos = tag_end + 2;
    for (size_t at = src_.find("{%", pos); at != std::string::npos; at = src_.find("{%", at + 2)) {
      size_t p = at + 2;
      const char open = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p++] : '\0';
      p = skip_spaces(p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p = skip_spaces(p + 6);
      const char close = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p++] : '\0';
      if (src_.compare(p, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos, at - pos);
      if (open == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (open != '+') {  // lstrip_blocks
        const size_t line_begin = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        const bool line_starting = line_begin > 0 || pos == 0 || src_[pos - 1] == '\n';
        if (line_starting && std::all_of(text.begin() + static_cast<long>(line_begin), text.end(), is_space))
          text.resize(line_begin);
      }
      emit_text(std::move(text), pos);
      return after_block_end(p + 2, close);
    }
    fail(tag, "unclosed '{% raw %}' (no '{% endraw %}')");
  }

  void emit_text(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back({TokenKind::kText, std::move(text), where(offset)});
  }

  size_t after_block_end(size_t pos, char modifier) const {
    if (modifier == '-') return skip_spaces(pos);
    if (modifier != '+' && pos < src_.size() && src_[pos] == '\n') return pos + 1;  // trim_blocks
    return pos;
  }

  size_t lex_comment(size_t tag, size_t body) {
    size_t close = src_.find("#}", body);
    if (close == std::string::npos) fail(tag, "unclosed comment '{#'");
    char modifier = close > body && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : '\0';
    return after_block_end(close + 2, modifier);
  }

  size_t lex_tag(size_t tag, size_t pos, bool is_block) {
    tokens_.push_back({is_block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, "", where(tag)});
    std::string brackets;  // open ( [ { : an end marker inside them is an operator
    while (true) {
      pos = skip_spaces(pos);
      if (pos >= src_.size()) fail(tag, is_block ? "unclosed tag '{%'" : "unclosed expression '{{'");
      if (brackets.empty()) {
        const char* close = is_block ? "%}" : "}}";
        if (src_.compare(pos, 2, close) == 0) {
          tokens_.push_back({is_block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, "", where(pos)});
          return is_block ? after_block_end(pos + 2, '\0') : pos + 2;
        }
        char c = src_[pos];
        if ((c == '-' || (c == '+' && is_block)) && src_.compare(pos + 1, 2, close) == 0) {
          tokens_.push_back({is_block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, "", where(pos)});
          return c == '-' ? skip_spaces(pos + 3) : pos + 3;
        }
      }
      pos = lex_expression_token(pos, brackets);
    }
  }

  size_t lex_expression_token(size_t pos, std::string& brackets) {
    char c = src_[pos];
    Location at = where(pos);
    if (is_name_start(c)) {
      size_t end = pos;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      tokens_.push_back({TokenKind::kName, src_.substr(pos, end - pos), at});
      return end;
    }
    if (is_digit(c)) return lex_number(pos);
    if (c == '\'' || c == '"') return lex_string(pos);
    static const char* kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwoChar)
      if (src_.compare(pos, 2, op) == 0) {
        tokens_.push_back({TokenKind::kOperator, op, at});
        return pos + 2;
      }
    if (!std::strchr("+-*/%~<>=()[]{},.:|", c) || c == '\0') fail(pos, std::string("unexpected character '") + c + "'");
    if (c == '(' || c == '[' || c == '{') brackets += c;
    if (c == ')' || c == ']' || c == '}') {
      char open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets.empty() || brackets.back() != open) fail(pos, std::string("unexpected '") + c + "'");
      brackets.pop_back();
    }
    tokens_.push_back({TokenKind::kOperator, std::string(1, c), at});
    return pos + 1;
  }

  size_t lex_number(size_t pos) {
    size_t end = pos;
    while (end < src_.size() && (is_digit(src_[end]) || src_[end] == '_')) ++end;
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      is_float = true;
      ++end;
      while (end < src_.size() && (is_digit(src_[end]) || src_[end] == '_')) ++end;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t exp = end + 1;
      if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
      if (exp < src_.size() && is_digit(src_[exp])) {
        is_float = true;
        end = exp;
        while (end < src_.size() && is_digit(src_[end])) ++end;
      }
    }
    std::string digits = src_.substr(pos, end - pos);
    digits.erase(std::remove(digits.begin(), digits.end(), '_'), digits.end());
    tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInt, digits, where(pos)});
    return end;
  }

  // Python's unicode-escape rules: known escapes are decoded, unknown ones kept verbatim.
  size_t lex_string(size_t pos) {
    char quote = src_[pos];
    std::string out;
    size_t i = pos + 1;
    while (true) {
      if (i >= src_.size()) fail(pos, "unterminated string");
      char c = src_[i];
      if (c == quote) break;
      if (c != '\\' || i + 1 >= src_.size()) {
        out += c;
        ++i;
        continue;
      }
      char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          size_t width = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t cp = 0;
          for (size_t k = 0; k < width; ++k) {
            int h = i + k < src_.size() ? hex_value(src_[i + k]) : -1;
            if (h < 0) fail(i - 2, "truncated \\" + std::string(1, e) + " escape in string");
            cp = cp * 16 + static_cast<char32_t>(h);
          }
          i += width;
          out += encode_utf8({cp});
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k, ++i)
              cp = cp * 8 + static_cast<char32_t>(src_[i] - '0');
            out += encode_utf8({cp});
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back({TokenKind::kString, std::move(out), where(pos)});
    return i + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;  // offset of each line's first character
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex_template(const std::string& source) { return Lexer(source).run(); }

}  // namespace exactly::jinja
