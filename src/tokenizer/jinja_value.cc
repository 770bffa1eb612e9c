// Python semantics of jinja values: printing, JSON, equality, truthiness.
#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/utf8.h"

namespace exactly::jinja {

const Value* ValueDict::find(const Value& key) const {
  if (key.is_string()) return find(key.text);
  WorkMeter::charge(items.size());
  for (const auto& [k, v] : items)
    if (!k.is_string() && equals(k, key)) return &v;
  return nullptr;
}

const Value* ValueDict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.text == key) return &v;
  return nullptr;
}

void ValueDict::set(Value key, Value value) {
  check_hashable(key);
  if (Value* found = const_cast<Value*>(find(key))) {
    *found = std::move(value);
    return;
  }
  items.emplace_back(std::move(key), std::move(value));
}

void ValueDict::set(const std::string& key, Value value) { set(Value::from_string(key), std::move(value)); }

bool is_hashable(const Value& key) {
  if (key.is_list() && key.tuple) return std::all_of(key.list->begin(), key.list->end(), is_hashable);
  return key.kind == Value::Kind::kNone || key.is_number() || key.is_string();
}

void check_hashable(const Value& key) {
  switch (key.kind) {
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString: return;
    case Value::Kind::kList:
      if (!key.tuple) break;
      for (const Value& item : *key.list) check_hashable(item);
      return;
    case Value::Kind::kUndefined:
      throw EvalError("a dict key is undefined" + (key.undefined_name.empty() ? "" : " (" + key.undefined_name + ")"));
    default:
      throw EvalError("a " + key.type_name() + " as a dict key is not supported");
  }
  throw EvalError("TypeError: unhashable type: '" + key.type_name() + "'");
}

Value Value::undefined(std::string name) {
  Value v;
  v.undefined_name = std::move(name);
  return v;
}
Value Value::none() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::from_bool(bool b) {
  Value v;
  v.kind = Kind::kBool;
  v.boolean = b;
  return v;
}
Value Value::from_int(int64_t i) {
  Value v;
  v.kind = Kind::kInt;
  v.integer = i;
  return v;
}
Value Value::from_float(double d) {
  Value v;
  v.kind = Kind::kFloat;
  v.real = d;
  return v;
}
Value Value::from_string(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.text = std::move(s);
  return v;
}
namespace {

// The depth and namespace flag of a container of `children`.
template <class Range, class Get>
void measure(Value& v, const Range& children, Get get) {
  int deepest = 0;
  for (const auto& c : children) {
    deepest = std::max(deepest, get(c).depth);
    v.holds_namespace |= get(c).holds_namespace;
  }
  if (deepest >= kMaxValueDepth)
    throw EvalError("a value nests more than " + std::to_string(kMaxValueDepth) + " lists and dicts deep");
  v.depth = deepest + 1;
}

}  // namespace

Value Value::from_list(ValueList items) {
  check_list_size(items.size());
  Value v;
  v.kind = Kind::kList;
  measure(v, items, [](const Value& c) -> const Value& { return c; });
  v.list = std::make_shared<const ValueList>(std::move(items));
  return v;
}
Value Value::from_tuple(ValueList items) {
  Value v = from_list(std::move(items));
  v.tuple = true;
  return v;
}
Value Value::from_dict(ValueDict d) {
  check_list_size(d.items.size());
  Value v;
  v.kind = Kind::kDict;
  measure(v, d.items, [](const auto& item) -> const Value& { return item.second; });
  for (const auto& item : d.items) v.holds_namespace |= item.first.holds_namespace;
  v.dict = std::make_shared<ValueDict>(std::move(d));
  return v;
}
Value Value::new_namespace(ValueDict d) {
  Value v = from_dict(std::move(d));
  if (v.holds_namespace) throw EvalError("a namespace cannot hold a namespace");
  v.kind = Kind::kNamespace;
  v.holds_namespace = true;
  return v;
}
Value Value::from_function(Function f) {
  Value v;
  v.kind = Kind::kFunction;
  v.function = std::make_shared<const Function>(std::move(f));
  return v;
}
Value Value::new_object(std::string type_name, std::shared_ptr<ValueDict> attributes, Function call) {
  Value v;
  v.kind = Kind::kObject;
  v.text = std::move(type_name);
  v.dict = std::move(attributes);
  for (const auto& item : v.dict->items) v.holds_namespace |= item.second.holds_namespace;
  if (call) v.function = std::make_shared<const Function>(std::move(call));
  return v;
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return boolean;
    case Kind::kInt: return integer != 0;
    case Kind::kFloat: return real != 0.0;
    case Kind::kString: return !text.empty();
    case Kind::kList: return !list->empty();
    case Kind::kDict: return !dict->items.empty();
    case Kind::kNamespace:
    case Kind::kFunction:
    case Kind::kObject: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return tuple ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kFunction: return "function";
    case Kind::kObject: return text;
  }
  return "?";
}

Value CallArgs::get(size_t i, const std::string& name, Value fallback) const {
  if (i < positional.size()) return positional[i];
  for (const auto& [k, v] : keyword)
    if (k == name) return v;
  return fallback;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  // Shortest round-trip digits, as Python's repr picks them.
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = std::stoi(sci.substr(e_pos + 1));
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_buf;
  }
  if (exponent < 0) return sign + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  size_t int_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_digits) return sign + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

// Jinja strings index and slice by code point. Template text and JSON values
// are UTF-8; a byte that starts no valid character stands for itself.
std::vector<char32_t> decode_utf8(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    const utf8::Scan sc = utf8::scan(s, i);
    if (sc.status == utf8::Status::kValid) {
      out.push_back(utf8::decode(s, i, sc.length));
      i += sc.length;
    } else {
      out.push_back(static_cast<unsigned char>(s[i]));
      ++i;
    }
  }
  return out;
}

std::string encode_utf8(const std::vector<char32_t>& cps) {
  std::string out;
  for (char32_t cp : cps) utf8::append(out, cp);
  return out;
}

namespace {

std::string string_repr(const std::string& s) {
  // Python prefers single quotes unless the text holds one and no double quote.
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string to_repr(const Value& v) {
  if (v.kind == Value::Kind::kString) return string_repr(v.text);
  if (v.kind == Value::Kind::kUndefined) return "Undefined";  // jinja2's Undefined in a container
  return to_str(v);
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.boolean ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.integer);
    case Value::Kind::kFloat: return float_repr(v.real);
    case Value::Kind::kString: return v.text;
    case Value::Kind::kList: {
      std::string out = v.tuple ? "(" : "[";
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i) out += ", ";
        append_bounded(out, to_repr((*v.list)[i]));
      }
      if (v.tuple) return out + (v.list->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      for (size_t i = 0; i < v.dict->items.size(); ++i) {
        if (i) out += ", ";
        append_bounded(out, to_repr(v.dict->items[i].first) + ": ");
        append_bounded(out, to_repr(v.dict->items[i].second));
      }
      return out + "}";
    }
    case Value::Kind::kNamespace: return "<Namespace>";
    case Value::Kind::kFunction: return "<function>";
    case Value::Kind::kObject:  // jinja2 prints the object's address, which no other renderer can match
      throw EvalError("printing a " + v.text + " object is not supported");
  }
  return "";
}

bool equals(const Value& a, const Value& b) {
  WorkMeter::charge(1);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.text == b.text;
    case Value::Kind::kList:
      if (a.tuple != b.tuple || a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i)
        if (!equals((*a.list)[i], (*b.list)[i])) return false;
      return true;
    case Value::Kind::kDict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* other = b.dict->find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    default: return a.dict == b.dict && a.function == b.function;
  }
}

}  // namespace exactly::jinja
