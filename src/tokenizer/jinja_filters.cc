// jinja2's filters and tests, restricted to what chat templates use. `tojson`
// is Hugging Face's replacement: json.dumps(ensure_ascii=False, indent=...).
#include <algorithm>
#include <climits>
#include <cmath>
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

Value tojson(const Value& subject, const CallArgs& args) {
  Value indent = args.get(1, "indent", Value::none());
  if (indent.is_none()) return Value::from_string(to_json(subject, 0, false));
  if (!indent.is_integral()) throw EvalError("tojson indent must be an integer");
  if (indent.as_int() > 64) throw EvalError("tojson indent above 64");
  return Value::from_string(to_json(subject, static_cast<int>(std::max<int64_t>(0, indent.as_int())), true));
}

}  // namespace

bool is_known_filter(const std::string& name) {
  static const char* kFilters[] = {"trim", "length", "count", "tojson", "default", "d", "upper", "lower", "title",
                                   "capitalize", "replace", "join", "first", "last", "list", "string", "int",
                                   "float", "items", "selectattr", "rejectattr", "select", "reject", "map",
                                   "safe", "abs", "reverse", "unique", "e", "escape"};
  return std::any_of(std::begin(kFilters), std::end(kFilters), [&](const char* f) { return name == f; });
}

Value apply_filter(const std::string& name, const Value& subject, const CallArgs& args) {
  if (name == "default" || name == "d") {
    bool boolean = args.get(1, "boolean", Value::from_bool(false)).truthy();
    bool use_default = subject.is_undefined() || (boolean && !subject.truthy());
    return use_default ? args.get(0, "default_value", Value::from_string("")) : subject;
  }
  if (name == "safe") return subject;
  if (name == "tojson") return tojson(subject, args);
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
  if (name == "unique") {
    ValueList out;
    const ValueList items = iterate(subject);
    // Each item is compared with the kept ones: quadratic work.
    WorkMeter::charge(static_cast<uint64_t>(items.size()) * items.size());
    for (const Value& v : items)
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return equals(o, v); })) out.push_back(v);
    return Value::from_list(std::move(out));
  }
  if (name == "items") {
    if (subject.is_undefined()) return Value::from_list({});
    if (!subject.is_dict()) throw EvalError("items filter needs a mapping, got " + subject.type_name());
    ValueList out;
    for (const auto& [k, v] : subject.dict->items) out.push_back(Value::from_list({Value::from_string(k), v}));
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
  if (name == "string" || name == "e" || name == "escape") return Value::from_string(text);
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
