// jinja2's filters and tests, restricted to what chat templates use. `tojson`
// is Hugging Face's replacement: json.dumps(ensure_ascii=False, indent=...).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <stdexcept>

#include "tokenizer/jinja_builtins.h"

namespace exactly::jinja {
namespace {

CallArgs drop_first(const CallArgs& args, size_t n) {
  CallArgs rest;
  if (args.positional.size() > n) rest.positional.assign(args.positional.begin() + static_cast<long>(n), args.positional.end());
  rest.keyword = args.keyword;
  return rest;
}

// jinja2's title filter capitalises after spaces, dashes and opening brackets.
std::string jinja_title(const std::string& s) {
  auto cps = decode_utf8(s);
  std::string out;
  bool word_start = true;
  for (char32_t c : cps) {
    bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == ' ' || (c >= 0x09 && c <= 0x0D);
    std::string ch = encode_utf8({c});
    out += separator ? ch : word_start ? py_upper(ch) : py_lower(ch);
    word_start = separator;
  }
  return out;
}

// A float's integer part; integers are 64-bit here, not Python's unbounded ones.
Value truncated(double d) {
  if (!(std::fabs(d) < 9.2e18)) throw EvalError("integer overflow (integers are 64-bit here)");
  return Value::from_int(static_cast<int64_t>(d));
}

Value to_int(const Value& v, const Value& fallback) {
  if (v.is_integral()) return Value::from_int(v.as_int());
  if (v.kind == Value::Kind::kFloat && std::isfinite(v.real)) return truncated(v.real);
  if (v.is_string()) {
    std::string s = py_strip(v.text, Value::undefined(), true, true);
    try {
      size_t used = 0;
      long long i = std::stoll(s, &used, 10);
      if (used == s.size()) return Value::from_int(i);
      double d = std::stod(s, &used);
      if (used == s.size() && std::isfinite(d)) return truncated(d);
    } catch (const std::invalid_argument&) {
    } catch (const std::out_of_range&) {
    }
  }
  return fallback.is_undefined() ? Value::from_int(0) : fallback;
}

Value to_float(const Value& v, const Value& fallback) {
  if (v.is_number()) return Value::from_float(v.as_double());
  if (v.is_string()) {
    std::string s = py_strip(v.text, Value::undefined(), true, true);
    try {
      size_t used = 0;
      double d = std::stod(s, &used);
      if (used == s.size()) return Value::from_float(d);
    } catch (const std::exception&) {
    }
  }
  return fallback.is_undefined() ? Value::from_float(0.0) : fallback;
}

// select/reject/selectattr/rejectattr: keep items whose test result equals `keep`.
Value filter_items(const Value& subject, const CallArgs& args, bool by_attribute, bool keep) {
  std::string attribute;
  size_t test_index = 0;
  if (by_attribute) {
    Value a = args.get(0, "attribute");
    if (!a.is_string()) throw EvalError("selectattr/rejectattr need an attribute name");
    attribute = a.text;
    test_index = 1;
  }
  Value test = args.get(test_index, "test");
  CallArgs test_args = drop_first(args, test_index + 1);
  test_args.keyword.clear();
  ValueList out;
  for (const Value& item : iterate(subject)) {
    Value probe = by_attribute ? get_attribute(item, attribute) : item;
    bool passed = test.is_undefined() ? probe.truthy() : apply_test(to_str(test), probe, test_args);
    if (passed == keep) out.push_back(item);
  }
  return Value::from_list(std::move(out));
}

Value map_items(const Value& subject, const CallArgs& args) {
  Value attribute = args.get(99, "attribute");
  ValueList out;
  if (!attribute.is_undefined()) {
    Value fallback = args.get(99, "default");
    for (const Value& item : iterate(subject)) {
      Value v = get_attribute(item, to_str(attribute));
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return Value::from_list(std::move(out));
  }
  Value filter = args.get(0, "filter");
  if (!filter.is_string()) throw EvalError("map needs a filter name or attribute=");
  CallArgs rest = drop_first(args, 1);
  for (const Value& item : iterate(subject)) out.push_back(apply_filter(filter.text, item, rest));
  return Value::from_list(std::move(out));
}

std::string join(const Value& subject, const CallArgs& args) {
  std::string separator = to_str(args.get(0, "d", Value::from_string("")));
  Value attribute = args.get(1, "attribute");
  std::string out;
  ValueList items = iterate(subject);
  for (size_t i = 0; i < items.size(); ++i) {
    const Value v = attribute.is_undefined() ? items[i] : get_attribute(items[i], to_str(attribute));
    if (i) append_bounded(out, separator);
    append_bounded(out, to_str(v));
  }
  WorkMeter::charge(out.size());
  return out;
}


// indent(width=4, first=False, blank=False): every line after the first (and
// the first with `first`) prefixed by width spaces, or by width itself when it
// is a string; blank lines only with `blank`.
std::string indent(const std::string& text, const CallArgs& args) {
  const Value width = args.get(0, "width", Value::from_int(4));
  if (!width.is_string() && (!width.is_integral() || width.as_int() > 256)) throw EvalError("indent width must be a string or an int up to 256");
  const std::string pad = width.is_string() ? width.text : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  const bool first = args.get(1, "first", Value::from_bool(false)).truthy();
  const bool blank = args.get(2, "blank", Value::from_bool(false)).truthy();
  const ValueList lines = py_splitlines(text + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    if (i > 0 && (blank || !lines[i].text.empty())) append_bounded(out, pad);
    append_bounded(out, lines[i].text);
  }
  return first ? pad + out : out;
}

// truncate(length=255, killwords=False, end='...', leeway=5), in code points.
std::string truncate(const std::string& text, const CallArgs& args) {
  const int64_t length = args.get(0, "length", Value::from_int(255)).as_int();
  const bool killwords = args.get(1, "killwords", Value::from_bool(false)).truthy();
  const std::string end = to_str(args.get(2, "end", Value::from_string("...")));
  const Value leeway_arg = args.get(3, "leeway", Value::none());
  const int64_t leeway = leeway_arg.is_none() ? 5 : leeway_arg.as_int();
  const int64_t end_length = static_cast<int64_t>(decode_utf8(end).size());
  if (length < end_length) throw EvalError("expected length >= " + std::to_string(end_length) + ", got " + std::to_string(length));
  if (leeway < 0) throw EvalError("expected leeway >= 0, got " + std::to_string(leeway));
  const auto cps = decode_utf8(text);
  if (static_cast<int64_t>(cps.size()) <= length + leeway) return text;
  std::string kept = encode_utf8({cps.begin(), cps.begin() + (length - end_length)});
  if (!killwords) {
    const size_t space = kept.rfind(' ');
    if (space != std::string::npos) kept.resize(space);
  }
  return kept + end;
}

// round(precision=0, method='common'): Python's round (half to even on the
// binary value), or floor / ceil at the precision; ints stay ints.
Value round_number(const Value& subject, const CallArgs& args) {
  const std::string method = to_str(args.get(1, "method", Value::from_string("common")));
  if (method != "common" && method != "floor" && method != "ceil")
    throw EvalError("method must be common, ceil or floor");
  const Value precision_arg = args.get(0, "precision", Value::from_int(0));
  if (!precision_arg.is_integral() || precision_arg.as_int() < 0 || precision_arg.as_int() > 30)
    throw EvalError("round's precision must be an integer from 0 to 30");
  if (!subject.is_number()) throw EvalError("round needs a number, got " + subject.type_name());
  const int precision = static_cast<int>(precision_arg.as_int());
  if (subject.is_integral() && method == "common") return Value::from_int(subject.as_int());
  const double x = subject.as_double(), scale = std::pow(10.0, precision);
  if (method == "floor") return Value::from_float(std::floor(x * scale) / scale);
  if (method == "ceil") return Value::from_float(std::ceil(x * scale) / scale);
  if (!std::isfinite(x)) return Value::from_float(x);
  char buffer[512];  // printf rounds the exact binary value, ties to even: Python's round
  std::snprintf(buffer, sizeof buffer, "%.*f", precision, x);
  return Value::from_float(std::strtod(buffer, nullptr));
}

}  // namespace

// Markup escaping, as jinja2's `e` gives it on a plain string.
std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  check_string_size(out.size());
  return out;
}

bool is_known_filter(const std::string& name) {
  static const char* kFilters[] = {"trim",   "length", "count",  "tojson",     "default",    "d",      "upper",
                                   "lower",  "title",  "capitalize", "replace", "join",    "first",  "last",
                                   "list",   "string", "int",    "float",      "items",      "selectattr",
                                   "rejectattr", "select", "reject", "map",   "safe",       "abs",    "reverse",
                                   "e",      "escape", "indent", "center",     "truncate",   "round",  "format",
                                   "attr"};
  return is_list_filter(name) || is_text_filter(name) ||
         std::any_of(std::begin(kFilters), std::end(kFilters), [&](const char* f) { return name == f; });
}

Value apply_filter(const std::string& name, const Value& subject, const CallArgs& args) {
  if (name == "default" || name == "d") {
    bool boolean = args.get(1, "boolean", Value::from_bool(false)).truthy();
    bool use_default = subject.is_undefined() || (boolean && !subject.truthy());
    return use_default ? args.get(0, "default_value", Value::from_string("")) : subject;
  }
  if (name == "safe" || ((name == "e" || name == "escape") && subject.markup)) {
    Value marked = subject;
    marked.markup = subject.is_string();
    return marked;
  }
  if (is_list_filter(name)) return apply_list_filter(name, subject, args);
  if (is_text_filter(name)) return apply_text_filter(name, subject, args);
  if (name == "round") return round_number(subject, args);
  if (name == "attr") {  // an attribute, never a key: jinja2's sandbox reads only what getattr would
    const std::string attribute = to_str(args.get(0, "name"));
    return subject.is_dict() && attribute != "items" && attribute != "keys" && attribute != "values" &&
                   attribute != "get"
               ? Value::undefined("'dict object' has no attribute '" + attribute + "'")
               : get_attribute(subject, attribute);
  }
  if (name == "tojson") return tojson_filter(subject, args);
  if (name == "length" || name == "count") return Value::from_int(length(subject));
  if (name == "list") return Value::from_list(iterate(subject));
  if (name == "first") {
    ValueList items = iterate(subject);
    return items.empty() ? Value::undefined("'No first item, sequence was empty.'") : items.front();
  }
  if (name == "last") {
    if (!subject.is_list() && !subject.is_string()) throw EvalError("last filter needs a sequence");
    ValueList items = iterate(subject);
    return items.empty() ? Value::undefined("'No last item, sequence was empty.'") : items.back();
  }
  if (name == "reverse") {
    if (subject.is_string()) return get_slice(subject, Value::undefined(), Value::undefined(), Value::from_int(-1));
    ValueList items = iterate(subject);
    std::reverse(items.begin(), items.end());
    return Value::from_list(std::move(items));
  }
  if (name == "items") {
    if (subject.is_undefined()) return Value::from_list({});
    if (!subject.is_dict()) throw EvalError("items filter needs a mapping, got " + subject.type_name());
    ValueList out;
    for (const auto& [k, v] : subject.dict->items) out.push_back(Value::from_tuple({k, v}));
    return Value::from_list(std::move(out));
  }
  if (name == "selectattr" || name == "rejectattr") return filter_items(subject, args, true, name == "selectattr");
  if (name == "select" || name == "reject") return filter_items(subject, args, false, name == "select");
  if (name == "map") return map_items(subject, args);
  if (name == "join") return Value::from_string(join(subject, args));
  if (name == "int") return to_int(subject, args.get(0, "default"));
  if (name == "float") return to_float(subject, args.get(0, "default"));
  if (name == "abs") {
    if (subject.kind == Value::Kind::kFloat) return Value::from_float(std::fabs(subject.real));
    if (subject.is_integral()) {
      if (subject.as_int() == INT64_MIN) throw EvalError("integer overflow (integers are 64-bit here)");
      return Value::from_int(std::llabs(subject.as_int()));
    }
    throw EvalError("bad operand type for abs(): '" + subject.type_name() + "'");
  }
  // The rest work on str(subject).
  std::string text = to_str(subject);
  if (name == "string") return Value::from_string(text);
  if (name == "e" || name == "escape") {
    Value escaped = Value::from_string(html_escape(text));
    escaped.markup = true;
    return escaped;
  }
  if (name == "indent") return Value::from_string(indent(text, args));
  if (name == "center") return Value::from_string(py_pad(text, args.get(0, "width", Value::from_int(80)).as_int(), " ", '^'));
  if (name == "truncate") return Value::from_string(truncate(text, args));
  if (name == "format") {
    Value values = Value::from_tuple(args.positional);
    if (!args.keyword.empty()) {
      ValueDict d;
      for (const auto& [k, v] : args.keyword) d.set(k, v);
      values = Value::from_dict(std::move(d));
    }
    return Value::from_string(py_percent_format(text, values));
  }
  if (name == "trim") return Value::from_string(py_strip(text, args.get(0, "chars"), true, true));
  if (name == "upper") return Value::from_string(py_upper(text));
  if (name == "lower") return Value::from_string(py_lower(text));
  if (name == "title") return Value::from_string(jinja_title(text));
  if (name == "capitalize") return Value::from_string(py_capitalize(text));
  if (name == "replace") {
    Value count = args.get(2, "count", Value::none());
    return Value::from_string(py_replace(text, to_str(args.get(0, "old")), to_str(args.get(1, "new")),
                                         count.is_none() ? -1 : count.as_int()));
  }
  throw EvalError("unknown filter '" + name + "'");
}

bool is_known_test(const std::string& name) {
  static const char* kTests[] = {"defined", "undefined", "none", "string", "mapping", "iterable", "sequence",
                                 "number", "integer", "float", "boolean", "true", "false", "callable", "odd",
                                 "even", "divisibleby", "equalto", "eq", "==", "ne", "!=", "lt", "<", "le", "<=",
                                 "gt", ">", "ge", ">=", "in", "sameas", "lower", "upper"};
  return std::any_of(std::begin(kTests), std::end(kTests), [&](const char* t) { return name == t; });
}

bool apply_test(const std::string& name, const Value& v, const CallArgs& args) {
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // Undefined is iterable and a sequence in jinja2 (it iterates as empty).
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == K::kInt;
  if (name == "float") return v.kind == K::kFloat;
  if (name == "boolean") return v.kind == K::kBool;
  if (name == "true") return v.kind == K::kBool && v.boolean;
  if (name == "false") return v.kind == K::kBool && !v.boolean;
  if (name == "callable") return v.kind == K::kFunction;
  if (name == "lower") return v.is_string() && py_lower(v.text) == v.text;
  if (name == "upper") return v.is_string() && py_upper(v.text) == v.text;
  if (name == "odd" || name == "even") {
    if (!v.is_integral()) throw EvalError(name + " test needs an integer");
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  Value other = args.get(0, "other");
  if (name == "divisibleby") {
    if (!v.is_integral() || !other.is_integral() || other.as_int() == 0) throw EvalError("divisibleby needs integers");
    return v.as_int() % other.as_int() == 0;
  }
  if (name == "equalto" || name == "eq" || name == "==") return equals(v, other);
  if (name == "ne" || name == "!=") return !equals(v, other);
  if (name == "lt" || name == "<") return compare(v, other) < 0;
  if (name == "le" || name == "<=") return compare(v, other) <= 0;
  if (name == "gt" || name == ">") return compare(v, other) > 0;
  if (name == "ge" || name == ">=") return compare(v, other) >= 0;
  if (name == "in") return contains(other, v);
  if (name == "sameas") {
    if (v.kind != other.kind) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.kind == K::kBool) return v.boolean == other.boolean;
    return v.is_mapping_like() ? v.dict == other.dict : v.is_list() ? v.list == other.list : equals(v, other);
  }
  throw EvalError("unknown test '" + name + "'");
}

}  // namespace exactly::jinja
