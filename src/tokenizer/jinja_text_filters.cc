// jinja2's filters that rewrite text for markup, URLs and reading: striptags,
// wordcount, wordwrap, urlencode, xmlattr and pprint. Where Python's result
// depends on tables or layouts this file does not reproduce (HTML entities
// beyond the common ones, hyphen-aware wrapping, pprint's multi-line layout),
// the filter refuses the input with an error rather than guess.
#include <re2/re2.h>

#include <algorithm>
#include <cstdio>

#include "tokenizer/jinja_builtins.h"

namespace exactly::jinja {
namespace {

std::string collapse_whitespace(const std::string& text) {
  std::string out;
  for (const Value& word : *call_string_method(text, "split", CallArgs{}).list) {
    if (!out.empty()) out += ' ';
    out += word.text;
  }
  return out;
}

// A character reference html.unescape decodes to itself alone; other code
// points (controls, surrogates, noncharacters) it maps through tables.
bool plain_code_point(uint64_t n) {
  return n == 9 || n == 10 || (n >= 0x20 && n <= 0x7E) || (n >= 0xA0 && n <= 0xD7FF) || (n >= 0xE000 && n <= 0xFDCF) ||
         (n >= 0xFDF0 && n <= 0x10FFFF && (n & 0xFFFE) != 0xFFFE);
}

[[noreturn]] void refuse_entity(const std::string& entity) {
  throw EvalError("striptags: the HTML character reference '" + entity + "' is not supported");
}

// html.unescape for the references chat text uses: &amp; &lt; &gt; &quot;
// &apos; &nbsp; and numeric ones; a lone '&' (or '&' and one letter) stays.
std::string html_unescape(const std::string& s) {
  static const std::pair<const char*, const char*> kNamed[] = {
      {"amp;", "&"}, {"lt;", "<"}, {"gt;", ">"}, {"quot;", "\""}, {"apos;", "'"}, {"nbsp;", "\xC2\xA0"}};
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '&') {
      out += s[i++];
      continue;
    }
    size_t j = i + 1;
    if (j < s.size() && s[j] == '#') {
      const bool hex = j + 1 < s.size() && (s[j + 1] == 'x' || s[j + 1] == 'X');
      size_t k = j + (hex ? 2 : 1);
      const size_t digits_start = k;
      while (k < s.size() && (hex ? std::isxdigit(static_cast<unsigned char>(s[k])) : std::isdigit(static_cast<unsigned char>(s[k]))))
        ++k;
      if (k == digits_start) {  // "&#" without digits is text
        out += s[i++];
        continue;
      }
      const std::string digits = s.substr(digits_start, k - digits_start);
      if (k < s.size() && s[k] == ';') ++k;
      const uint64_t n = digits.size() > 8 ? UINT64_MAX : std::stoull(digits, nullptr, hex ? 16 : 10);
      if (!plain_code_point(n)) refuse_entity(s.substr(i, k - i));
      out += encode_utf8({static_cast<char32_t>(n)});
      i = k;
      continue;
    }
    static const std::string kStops = "\t\n\f <&#;";
    size_t k = j;
    while (k < s.size() && k - j < 32 && kStops.find(s[k]) == std::string::npos) ++k;
    const bool semicolon = k < s.size() && s[k] == ';';
    const std::string name = s.substr(j, k - j) + (semicolon ? ";" : "");
    if (name.empty() || (!semicolon && k - j == 1)) {  // no entity name is one letter long
      out += s[i++];
      continue;
    }
    auto known = std::find_if(std::begin(kNamed), std::end(kNamed), [&](const auto& e) { return name == e.first; });
    if (known == std::end(kNamed)) refuse_entity("&" + name);
    out += known->second;
    i = k + 1;
  }
  return out;
}

// markupsafe's striptags: tags and comments removed (an unclosed one ends
// the search), whitespace collapsed to single spaces, references unescaped.
std::string strip_tags(const std::string& value) {
  std::string kept;
  size_t pos = 0;
  for (size_t start; (start = value.find('<', pos)) != std::string::npos;) {
    size_t end;
    if (value.compare(start, 4, "<!--") == 0) {
      end = value.find("-->", start + 4);
      if (end == std::string::npos) break;
      end += 3;
    } else {
      end = value.find('>', start);
      if (end == std::string::npos) break;
      end += 1;
    }
    kept += value.substr(pos, start - pos);
    pos = end;
  }
  if (pos > 0) kept += value.substr(pos);
  return html_unescape(collapse_whitespace(pos > 0 ? kept : value));
}

// Python's \w+ over str: runs of letters, digits, numerals and underscores.
int64_t word_count(const std::string& text) {
  static const RE2 word(R"([\pL\pN_]+)");
  re2::StringPiece input(text);
  int64_t n = 0;
  while (RE2::FindAndConsume(&input, word)) ++n;
  return n;
}

// textwrap's chunks of a line: runs of its whitespace (ASCII only) and of the rest.
std::vector<std::u32string> wrap_chunks(const std::u32string& line) {
  auto space = [](char32_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; };
  std::vector<std::u32string> chunks;
  for (size_t i = 0; i < line.size();) {
    size_t j = i;
    while (j < line.size() && space(line[j]) == space(line[i])) ++j;
    chunks.push_back(line.substr(i, j - i));
    i = j;
  }
  return chunks;
}

bool blank(const std::u32string& chunk) {
  return py_strip(encode_utf8({chunk.begin(), chunk.end()}), Value::undefined(), true, true).empty();
}

// textwrap.wrap(line, width, expand_tabs=False, replace_whitespace=False,
// break_long_words=...) for a line without hyphens: chunks fill a line up to
// `width` code points; whitespace at a line's end (and, after the first line,
// at its start) is dropped; a word longer than a line is cut when allowed.
std::vector<std::u32string> wrap_line(const std::u32string& line, size_t width, bool break_long_words) {
  std::vector<std::u32string> chunks = wrap_chunks(line);
  std::reverse(chunks.begin(), chunks.end());
  std::vector<std::u32string> lines;
  while (!chunks.empty()) {
    WorkMeter::charge(kStepWork);
    std::vector<std::u32string> current;
    size_t length = 0;
    if (!lines.empty() && blank(chunks.back())) chunks.pop_back();
    while (!chunks.empty() && length + chunks.back().size() <= width) {
      length += chunks.back().size();
      current.push_back(std::move(chunks.back()));
      chunks.pop_back();
    }
    if (!chunks.empty() && chunks.back().size() > width) {
      if (break_long_words) {
        const size_t room = width - length;  // may be 0: the word starts the next line
        current.push_back(chunks.back().substr(0, room));
        chunks.back() = chunks.back().substr(room);
      } else if (current.empty()) {
        current.push_back(std::move(chunks.back()));
        chunks.pop_back();
      }
    }
    if (!current.empty() && blank(current.back())) current.pop_back();
    if (current.empty()) continue;
    std::u32string joined;
    for (const auto& c : current) joined += c;
    lines.push_back(std::move(joined));
  }
  return lines;
}

std::string url_quote(const std::string& text, bool for_query) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (c == '/' && !for_query)) {
      out += ch;
    } else if (c == ' ' && for_query) {
      out += '+';
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  check_string_size(out.size());
  return out;
}

// pprint's order for dict keys: Python's <, else the names of the types.
bool pprint_key_less(const Value& a, const Value& b) {
  try {
    return compare(a, b) < 0;
  } catch (const EvalError&) {
    auto type_of = [](const Value& v) { return v.is_list() && v.tuple ? std::string("tuple") : v.type_name(); };
    if (type_of(a) == type_of(b)) throw EvalError("pprint: dict keys that Python orders by address are not supported");
    return type_of(a) < type_of(b);
  }
}

// repr() with every dict's items in key order, as pprint writes a value that fits on a line.
std::string sorted_repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kList: {
      std::string out = v.tuple ? "(" : "[";
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i) out += ", ";
        append_bounded(out, sorted_repr((*v.list)[i]));
      }
      return out + (!v.tuple ? "]" : v.list->size() == 1 ? ",)" : ")");
    }
    case Value::Kind::kDict: {
      std::vector<size_t> order(v.dict->items.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return pprint_key_less(v.dict->items[a].first, v.dict->items[b].first);
      });
      std::string out = "{";
      for (size_t i = 0; i < order.size(); ++i) {
        if (i) out += ", ";
        append_bounded(out, sorted_repr(v.dict->items[order[i]].first) + ": ");
        append_bounded(out, sorted_repr(v.dict->items[order[i]].second));
      }
      return out + "}";
    }
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString: return to_repr(v);
    default: throw EvalError("pprint of a " + v.type_name() + " is not supported");
  }
}

}  // namespace

bool is_text_filter(const std::string& name) {
  static const char* kFilters[] = {"striptags", "wordcount", "wordwrap", "urlencode", "xmlattr", "pprint"};
  return std::any_of(std::begin(kFilters), std::end(kFilters), [&](const char* f) { return name == f; });
}

// wordwrap(width=79, break_long_words=True, wrapstring=None, break_on_hyphens=True):
// each line wrapped by textwrap, the pieces joined by wrapstring ("\n").
std::string wrap_words(const std::string& text, const CallArgs& args) {
  const Value width = args.get(0, "width", Value::from_int(79));
  if (!width.is_integral() || width.as_int() <= 0) throw EvalError("ValueError: invalid width (must be > 0)");
  const bool break_long_words = args.get(1, "break_long_words", Value::from_bool(true)).truthy();
  const Value wrapstring = args.get(2, "wrapstring", Value::none());
  const std::string separator = wrapstring.is_none() ? "\n" : to_str(wrapstring);
  const bool break_on_hyphens = args.get(3, "break_on_hyphens", Value::from_bool(true)).truthy();
  if (break_on_hyphens && text.find('-') != std::string::npos)
    throw EvalError("wordwrap of text with hyphens is not supported (pass break_on_hyphens=false)");
  std::string out;
  const ValueList lines = py_splitlines(text, false);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) append_bounded(out, separator);
    const std::vector<char32_t> cps = decode_utf8(lines[i].text);
    const auto pieces = wrap_line({cps.begin(), cps.end()}, static_cast<size_t>(width.as_int()), break_long_words);
    for (size_t j = 0; j < pieces.size(); ++j) {
      if (j) append_bounded(out, separator);
      append_bounded(out, encode_utf8({pieces[j].begin(), pieces[j].end()}));
    }
  }
  return out;
}

// urlencode: a string quoted for a URL path ("/" kept); a mapping or a
// sequence of pairs as a query string, key=value joined by "&".
std::string url_encode(const Value& subject) {
  if (subject.is_string() || subject.is_number() || subject.is_none()) return url_quote(to_str(subject), false);
  ValueList pairs;
  if (subject.is_dict()) {
    for (const auto& [k, v] : subject.dict->items) pairs.push_back(Value::from_tuple({k, v}));
  } else {
    pairs = iterate(subject);
  }
  std::string out;
  for (const Value& pair : pairs) {
    if (!pair.is_list() || pair.list->size() != 2) throw EvalError("urlencode needs (key, value) pairs");
    if (!out.empty()) out += '&';
    append_bounded(out, url_quote(to_str((*pair.list)[0]), true) + "=" + url_quote(to_str((*pair.list)[1]), true));
  }
  return out;
}

// xmlattr(autospace=True): key="value" for each item whose value is neither
// none nor undefined, both escaped; a key with whitespace, /, > or = is refused.
std::string xml_attributes(const Value& subject, const CallArgs& args) {
  if (!subject.is_dict()) throw EvalError("xmlattr needs a mapping, got " + subject.type_name());
  std::string out;
  for (const auto& [key, value] : subject.dict->items) {
    if (value.is_none() || value.is_undefined()) continue;
    if (!key.is_string()) throw EvalError("TypeError: expected string or bytes-like object, got '" + key.type_name() + "'");
    if (key.text.find_first_of(" \t\n\r\f\v/>=") != std::string::npos)
      throw EvalError("ValueError: Invalid character in attribute name: " + to_repr(key));
    if (!out.empty()) out += ' ';
    const std::string text = to_str(value);
    append_bounded(out, html_escape(key.text) + "=\"" + (value.markup ? text : html_escape(text)) + "\"");
  }
  const bool autospace = args.get(0, "autospace", Value::from_bool(true)).truthy();
  return autospace && !out.empty() ? " " + out : out;
}

// pprint: a value whose repr fits in 80 code points is that repr with dict
// keys in order; longer strings and containers pprint lays out over lines,
// which is not supported here.
std::string pretty_print(const Value& subject) {
  const std::string line = sorted_repr(subject);
  WorkMeter::charge(line.size() * kDecodeWork);
  const bool splittable = subject.is_string() || subject.is_list() || subject.is_dict();
  if (splittable && decode_utf8(line).size() > 80)
    throw EvalError("pprint of a value longer than 80 characters (laid out over lines) is not supported");
  return line;
}

Value apply_text_filter(const std::string& name, const Value& subject, const CallArgs& args) {
  if (name == "urlencode") return Value::from_string(url_encode(subject));
  if (name == "xmlattr") return Value::from_string(xml_attributes(subject, args));
  if (name == "pprint") return Value::from_string(pretty_print(subject));
  const std::string text = to_str(subject);
  WorkMeter::charge(text.size() * kDecodeWork);
  if (name == "striptags") return Value::from_string(strip_tags(text));
  if (name == "wordcount") return Value::from_int(word_count(text));
  return Value::from_string(wrap_words(text, args));
}

}  // namespace exactly::jinja
