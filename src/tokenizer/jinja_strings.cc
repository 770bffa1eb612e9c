// Python str methods that chat templates call: strip, split, startswith,
// replace, upper, title, ... Case mapping covers ASCII, Latin-1, Greek and
// Cyrillic letters; other scripts are left unchanged.
#include <re2/re2.h>

#include <algorithm>

#include "tokenizer/jinja_builtins.h"

namespace exactly::jinja {
namespace {

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) || (c >= 0x430 && c <= 0x44F))
    return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) || (c >= 0x410 && c <= 0x42F))
    return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool is_cased(char32_t c) { return to_upper(c) != c || to_lower(c) != c; }

std::string map_chars(const std::string& s, char32_t (*f)(char32_t)) {
  auto cps = decode_utf8(s);
  std::transform(cps.begin(), cps.end(), cps.begin(), f);
  return encode_utf8(cps);
}

std::string py_title(const std::string& s) {
  auto cps = decode_utf8(s);
  bool previous_cased = false;
  for (char32_t& c : cps) {
    bool cased = is_cased(c);
    c = previous_cased ? to_lower(c) : to_upper(c);
    previous_cased = cased;
  }
  return encode_utf8(cps);
}

ValueList py_split(const std::string& s, const Value& sep, int64_t maxsplit) {
  ValueList out;
  if (sep.is_undefined() || sep.is_none()) {
    auto cps = decode_utf8(s);
    size_t i = 0;
    while (true) {
      while (i < cps.size() && is_py_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      size_t j = i;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        j = cps.size();
        while (j > i && is_py_space(cps[j - 1])) --j;
      } else {
        while (j < cps.size() && !is_py_space(cps[j])) ++j;
      }
      out.push_back(Value::from_string(encode_utf8({cps.begin() + static_cast<long>(i), cps.begin() + static_cast<long>(j)})));
      i = j;
    }
    return out;
  }
  if (!sep.is_string()) throw EvalError("split() separator must be a string");
  if (sep.text.empty()) throw EvalError("empty separator");
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    size_t found = s.find(sep.text, start);
    if (found == std::string::npos) break;
    out.push_back(Value::from_string(s.substr(start, found - start)));
    start = found + sep.text.size();
  }
  out.push_back(Value::from_string(s.substr(start)));
  return out;
}

bool affix_matches(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) throw EvalError("startswith/endswith argument must be str or a tuple of str");
    if (a.text.size() > s.size()) return false;
    return prefix ? s.compare(0, a.text.size(), a.text) == 0
                  : s.compare(s.size() - a.text.size(), a.text.size(), a.text) == 0;
  };
  if (affix.is_list()) return std::any_of(affix.list->begin(), affix.list->end(), one);
  return one(affix);
}

// Python's str.isalpha, isdecimal, isdigit and isalnum over the whole string
// (false when empty), from the Unicode categories RE2 knows: digits are the
// decimal digits and the digit-valued superscripts, subscripts and circled forms.
bool all_of_class(const std::string& s, const std::string& name) {
  static const RE2 alpha(R"(\p{L}+)"), decimal(R"(\p{Nd}+)"), alnum(R"([\p{L}\p{N}]+)");
  static const RE2 digit(
      R"([\p{Nd}\x{B2}\x{B3}\x{B9}\x{2070}\x{2074}-\x{2079}\x{2080}-\x{2089}\x{2460}-\x{2468}\x{2474}-\x{247C})"
      R"(\x{2488}-\x{2490}\x{24EA}\x{24F5}-\x{24FD}\x{24FF}\x{2776}-\x{277E}\x{2780}-\x{2788}\x{278A}-\x{2792})"
      R"(\x{1369}-\x{1371}\x{19DA}\x{1F100}-\x{1F10A}]+)");
  const RE2& re = name == "isalpha" ? alpha : name == "isdecimal" ? decimal : name == "isdigit" ? digit : alnum;
  return !s.empty() && RE2::FullMatch(s, re);
}

// isupper / islower: a cased character, and none of the other case.
bool cased_as(const std::string& s, bool upper) {
  bool any = false;
  for (char32_t c : decode_utf8(s)) {
    if (!is_cased(c)) continue;
    if ((upper ? to_upper(c) : to_lower(c)) != c) return false;
    any = true;
  }
  return any;
}

char32_t swap_case(char32_t c) { return to_upper(c) != c ? to_upper(c) : to_lower(c); }

// rsplit: split() from the right.
ValueList py_rsplit(const std::string& s, const Value& sep, int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, maxsplit);
  ValueList out;
  if (sep.is_undefined() || sep.is_none()) {
    auto cps = decode_utf8(s);
    size_t j = cps.size();
    while (true) {
      while (j > 0 && is_py_space(cps[j - 1])) --j;
      if (j == 0) break;
      size_t i = j;
      if (static_cast<int64_t>(out.size()) >= maxsplit) {
        i = 0;  // the rest, its leading whitespace kept
      } else {
        while (i > 0 && !is_py_space(cps[i - 1])) --i;
      }
      out.insert(out.begin(), Value::from_string(encode_utf8({cps.begin() + static_cast<long>(i), cps.begin() + static_cast<long>(j)})));
      j = i;
    }
    return out;
  }
  if (!sep.is_string() || sep.text.empty()) throw EvalError(sep.is_string() ? "empty separator" : "rsplit() separator must be a string");
  size_t end = s.size();
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep.text.size()) break;
    const size_t found = s.rfind(sep.text, end - sep.text.size());
    if (found == std::string::npos) break;
    out.insert(out.begin(), Value::from_string(s.substr(found + sep.text.size(), end - found - sep.text.size())));
    end = found;
  }
  out.insert(out.begin(), Value::from_string(s.substr(0, end)));
  return out;
}

// The code point index of the first (or last) occurrence of `needle`, or -1.
int64_t find_index(const std::string& self, const std::string& needle, bool last) {
  const size_t at = last ? self.rfind(needle) : self.find(needle);
  return at == std::string::npos ? -1 : static_cast<int64_t>(decode_utf8(self.substr(0, at)).size());
}

int64_t count_int(const Value& v, int64_t fallback) {
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_integral()) throw EvalError("expected an integer argument");
  return v.as_int();
}

}  // namespace

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  auto cps = decode_utf8(s);
  std::vector<char32_t> set;
  bool whitespace = chars.is_undefined() || chars.is_none();
  if (!whitespace) set = decode_utf8(to_str(chars));
  auto strip_it = [&](char32_t c) {
    return whitespace ? is_py_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t begin = 0, end = cps.size();
  if (left)
    while (begin < end && strip_it(cps[begin])) ++begin;
  if (right)
    while (end > begin && strip_it(cps[end - 1])) --end;
  return encode_utf8({cps.begin() + static_cast<long>(begin), cps.begin() + static_cast<long>(end)});
}

// str.casefold(): lower(), except where Unicode folds a letter otherwise:
// sharp s to "ss", final sigma and the Greek symbol forms to their letters.
std::string py_casefold(const std::string& s) {
  std::vector<char32_t> out;
  for (char32_t c : decode_utf8(s)) {
    switch (c) {
      case 0xDF: case 0x1E9E: out.insert(out.end(), {'s', 's'}); continue;
      case 0x17F: c = 's'; break;
      case 0xB5: c = 0x3BC; break;
      case 0x3C2: c = 0x3C3; break;
      case 0x3D0: c = 0x3B2; break;
      case 0x3D1: c = 0x3B8; break;
      case 0x3D5: c = 0x3C6; break;
      case 0x3D6: c = 0x3C0; break;
      case 0x3F0: c = 0x3BA; break;
      case 0x3F1: c = 0x3C1; break;
      case 0x3F5: c = 0x3B5; break;
      default: c = to_lower(c);
    }
    out.push_back(c);
  }
  return encode_utf8(out);
}

std::string py_upper(const std::string& s) { return map_chars(s, to_upper); }
std::string py_lower(const std::string& s) { return map_chars(s, to_lower); }

std::string py_capitalize(const std::string& s) {
  auto cps = decode_utf8(s);
  for (size_t i = 0; i < cps.size(); ++i) cps[i] = i == 0 ? to_upper(cps[i]) : to_lower(cps[i]);
  return encode_utf8(cps);
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& replacement, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement around every character.
    auto cps = decode_utf8(s);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) append_bounded(out, replacement), ++done;
      append_bounded(out, encode_utf8({c}));
    }
    if (count < 0 || done < count) append_bounded(out, replacement);
    return out;
  }
  size_t start = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    size_t found = s.find(old, start);
    if (found == std::string::npos) break;
    append_bounded(out, std::string_view(s).substr(start, found - start));
    append_bounded(out, replacement);
    start = found + old.size();
  }
  append_bounded(out, std::string_view(s).substr(start));
  return out;
}

ValueList py_splitlines(const std::string& s, bool keep_ends) {
  ValueList out;
  auto cps = decode_utf8(s);
  size_t start = 0;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    const bool boundary = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
                          c == 0x2028 || c == 0x2029;
    if (!boundary) continue;
    const size_t end = i;
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    out.push_back(Value::from_string(encode_utf8({cps.begin() + static_cast<long>(start),
                                                  cps.begin() + static_cast<long>(keep_ends ? i + 1 : end)})));
    start = i + 1;
  }
  if (start < cps.size()) out.push_back(Value::from_string(encode_utf8({cps.begin() + static_cast<long>(start), cps.end()})));
  return out;
}

std::string py_pad(const std::string& s, int64_t width, const std::string& fill, char align) {
  const auto fill_cps = decode_utf8(fill);
  if (fill_cps.size() != 1) throw EvalError("The fill character must be exactly one character long");
  const int64_t length = static_cast<int64_t>(decode_utf8(s).size());
  if (width > static_cast<int64_t>(kMaxStringBytes)) throw EvalError("padding width above the string bound");
  const int64_t margin = width - length;
  if (margin <= 0) return s;
  // CPython's center puts the odd space on the left when the width is odd.
  const int64_t left = align == '<' ? 0 : align == '>' ? margin : margin / 2 + (margin & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < margin - left; ++i) out += fill;
  check_string_size(out.size());
  return out;
}

bool is_string_method(const std::string& name) {
  static const char* kMethods[] = {"strip",      "lstrip",     "rstrip",     "split",      "rsplit",   "splitlines",
                                   "startswith", "endswith",   "upper",      "lower",      "title",    "capitalize",
                                   "swapcase",   "replace",    "find",       "rfind",      "index",    "rindex",
                                   "count",      "join",       "removeprefix", "removesuffix", "partition",
                                   "rpartition", "isalpha",    "isdecimal",  "isdigit",    "isalnum",  "isspace",
                                   "isupper",    "islower",    "zfill",      "ljust",      "rjust",    "center",
                                   "format",     "casefold"};
  return std::any_of(std::begin(kMethods), std::end(kMethods), [&](const char* m) { return name == m; });
}

Value call_string_method(const std::string& self, const std::string& name, const CallArgs& args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return Value::from_string(py_strip(self, args.get(0, "chars"), name != "rstrip", name != "lstrip"));
  if (name == "split") return Value::from_list(py_split(self, args.get(0, "sep"), count_int(args.get(1, "maxsplit"), -1)));
  if (name == "startswith" || name == "endswith")
    return Value::from_bool(affix_matches(self, args.get(0, "prefix"), name == "startswith"));
  if (name == "rsplit")
    return Value::from_list(py_rsplit(self, args.get(0, "sep"), count_int(args.get(1, "maxsplit"), -1)));
  if (name == "splitlines") return Value::from_list(py_splitlines(self, args.get(0, "keepends").truthy()));
  if (name == "format") return Value::from_string(py_str_format(self, args));
  if (name == "isalpha" || name == "isdecimal" || name == "isdigit" || name == "isalnum")
    return Value::from_bool(all_of_class(self, name));
  if (name == "isspace") {
    const auto cps = decode_utf8(self);
    return Value::from_bool(!cps.empty() && std::all_of(cps.begin(), cps.end(), is_py_space));
  }
  if (name == "isupper" || name == "islower") return Value::from_bool(cased_as(self, name == "isupper"));
  if (name == "swapcase") return Value::from_string(map_chars(self, swap_case));
  if (name == "casefold") return Value::from_string(py_casefold(self));
  if (name == "zfill" || name == "ljust" || name == "rjust" || name == "center") {
    const int64_t width = count_int(args.get(0, "width"), 0);
    if (name != "zfill") {
      return Value::from_string(py_pad(self, width, to_str(args.get(1, "fillchar", Value::from_string(" "))),
                                       name == "ljust" ? '<' : name == "rjust" ? '>' : '^'));
    }
    const bool sign = !self.empty() && (self[0] == '+' || self[0] == '-');
    std::string padded = py_pad(self.substr(sign ? 1 : 0), width - (sign ? 1 : 0), "0", '>');
    return Value::from_string(sign ? self.substr(0, 1) + padded : padded);
  }
  if (name == "upper") return Value::from_string(py_upper(self));
  if (name == "lower") return Value::from_string(py_lower(self));
  if (name == "title") return Value::from_string(py_title(self));
  if (name == "capitalize") return Value::from_string(py_capitalize(self));
  if (name == "replace") {
    Value old = args.get(0, "old"), replacement = args.get(1, "new");
    if (!old.is_string() || !replacement.is_string()) throw EvalError("replace() arguments must be strings");
    return Value::from_string(py_replace(self, old.text, replacement.text, count_int(args.get(2, "count"), -1)));
  }
  Value needle = args.get(0, "sub");
  if (name == "join") {
    std::string out;
    ValueList items = iterate(needle);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) throw EvalError("sequence item " + std::to_string(i) + ": expected str instance");
      if (i) append_bounded(out, self);
      append_bounded(out, items[i].text);
    }
    return Value::from_string(std::move(out));
  }
  if (!needle.is_string()) throw EvalError(name + "() argument must be str");
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const int64_t at = find_index(self, needle.text, name[0] == 'r');
    if (at < 0 && name.ends_with("index")) throw EvalError("ValueError: substring not found");
    return Value::from_int(at);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const bool prefix = name == "removeprefix";
    return Value::from_string(affix_matches(self, needle, prefix)
                                  ? (prefix ? self.substr(needle.text.size()) : self.substr(0, self.size() - needle.text.size()))
                                  : self);
  }
  if (name == "partition" || name == "rpartition") {
    if (needle.text.empty()) throw EvalError("empty separator");
    const size_t at = name == "partition" ? self.find(needle.text) : self.rfind(needle.text);
    auto str = [](std::string t) { return Value::from_string(std::move(t)); };
    if (at == std::string::npos)
      return name == "partition" ? Value::from_tuple({str(self), str(""), str("")})
                                 : Value::from_tuple({str(""), str(""), str(self)});
    return Value::from_tuple({str(self.substr(0, at)), needle, str(self.substr(at + needle.text.size()))});
  }
  // count: non-overlapping occurrences
  if (needle.text.empty()) return Value::from_int(static_cast<int64_t>(decode_utf8(self).size()) + 1);
  int64_t n = 0;
  for (size_t at = self.find(needle.text); at != std::string::npos; at = self.find(needle.text, at + needle.text.size()))
    ++n;
  return Value::from_int(n);
}

}  // namespace exactly::jinja
