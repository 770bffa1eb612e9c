// Operators and element access with Python semantics (floor division and
// modulo follow the divisor's sign; bool counts as int; strings by code point).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "tokenizer/jinja_builtins.h"

namespace exactly::jinja {
namespace {

[[noreturn]] void fail_undefined(const Value& v) {
  throw EvalError(v.undefined_name.empty() ? std::string("value is undefined") : v.undefined_name);
}

Value dict_method(const Value& self, const std::string& name) {
  auto dict = self.dict;
  return Value::from_function([dict, name](CallArgs& args) -> Value {
    if (name == "get") {
      const Value key = args.get(0, "key");
      check_hashable(key);
      const Value* found = dict->find(key);
      return found ? *found : args.get(1, "default", Value::none());
    }
    ValueList out;
    for (const auto& [k, v] : dict->items) {
      if (name == "keys") out.push_back(k);
      else if (name == "values") out.push_back(v);
      else out.push_back(Value::from_tuple({k, v}));
    }
    return Value::from_list(std::move(out));
  });
}

// list.index(x) (ValueError when absent) and list.count(x).
Value list_method(const Value& self, const std::string& name) {
  auto list = self.list;
  return Value::from_function([list, name](CallArgs& args) -> Value {
    const Value x = args.get(0, "value");
    WorkMeter::charge(list->size());
    int64_t count = 0;
    for (size_t i = 0; i < list->size(); ++i) {
      if (!equals((*list)[i], x)) continue;
      if (name == "index") return Value::from_int(static_cast<int64_t>(i));
      ++count;
    }
    if (name == "index") throw EvalError("ValueError: " + to_repr(x) + " is not in list");
    return Value::from_int(count);
  });
}

// Python's slice.indices(): clamps start/stop for a sequence of `size`.
void slice_indices(int64_t size, const Value& start_v, const Value& stop_v, int64_t step, int64_t& start,
                   int64_t& stop) {
  auto bound = [&](const Value& v, int64_t fallback) -> int64_t {
    if (v.is_undefined() || v.is_none()) return fallback;
    if (!v.is_integral()) throw EvalError("slice indices must be integers");
    int64_t i = v.as_int();
    if (i < 0) i += size;
    if (step > 0) return std::clamp<int64_t>(i, 0, size);
    return std::clamp<int64_t>(i, -1, size - 1);
  };
  start = bound(start_v, step > 0 ? 0 : size - 1);
  stop = bound(stop_v, step > 0 ? size : -1);
}

[[noreturn]] void overflow() { throw EvalError("integer overflow (integers are 64-bit here)"); }

int64_t floor_div(int64_t a, int64_t b) {
  if (a == INT64_MIN && b == -1) overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

int64_t sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}

int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

// x ** y for y >= 0 by squaring: about 2 * 63 multiplications at most.
int64_t int_power(int64_t x, int64_t y) {
  int64_t result = 1;
  while (y > 0) {
    if (y & 1) result = mul(result, x);
    y >>= 1;
    if (y > 0) x = mul(x, x);
  }
  return result;
}

// The size is checked before anything is built.
Value repeat(const Value& seq, int64_t times) {
  const size_t unit = seq.is_string() ? seq.text.size() : seq.list->size();
  const size_t n = times > 0 ? static_cast<size_t>(times) : 0;
  const size_t limit = seq.is_string() ? kMaxStringBytes : kMaxListItems;
  if (unit > 0 && n > limit / unit) {
    if (seq.is_string()) check_string_size(limit + 1);
    check_list_size(limit + 1);
  }
  if (seq.is_string()) {
    std::string out;
    out.reserve(unit * n);
    for (size_t i = 0; i < n; ++i) out += seq.text;
    return Value::from_string(std::move(out));
  }
  ValueList out;
  for (size_t i = 0; i < n; ++i) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::from_list(std::move(out));
}

}  // namespace

Value get_attribute(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Value::Kind::kUndefined: fail_undefined(obj);
    case Value::Kind::kString:
      if (is_string_method(name)) {
        std::string self = obj.text;
        return Value::from_function(
            [self, name](CallArgs& args) { return call_string_method(self, name, args); });
      }
      break;
    case Value::Kind::kDict:
      // Python looks up attributes before keys: `d.items` is the method even if "items" is a key.
      if (name == "items" || name == "keys" || name == "values" || name == "get") return dict_method(obj, name);
      [[fallthrough]];
    case Value::Kind::kNamespace:
    case Value::Kind::kObject:
      if (const Value* v = obj.dict->find(name)) return *v;
      break;
    case Value::Kind::kList:
      if (obj.group && (name == "grouper" || name == "list")) return (*obj.list)[name == "grouper" ? 0 : 1];
      if (name == "index" || name == "count") return list_method(obj, name);
      break;
    default: break;
  }
  std::string why = "'";  // built by appending: GCC 12 misreports "lit" + string as overlapping
  why.append(obj.type_name()).append(" object' has no attribute '").append(name).append("'");
  return Value::undefined(std::move(why));
}

Value get_item(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Value::Kind::kUndefined: fail_undefined(obj);
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (!key.is_integral()) break;
      std::vector<char32_t> chars;
      if (obj.is_string()) {
        WorkMeter::charge(obj.text.size() * kDecodeWork);  // strings index by code point: a decode each time
        chars = decode_utf8(obj.text);
      }
      int64_t size = obj.is_string() ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(obj.list->size());
      int64_t i = key.as_int() < 0 ? key.as_int() + size : key.as_int();
      if (i < 0 || i >= size) break;
      if (obj.is_string()) return Value::from_string(encode_utf8({chars[static_cast<size_t>(i)]}));
      return (*obj.list)[static_cast<size_t>(i)];
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      if (key.is_string()) {
        if (const Value* v = obj.dict->find(key.text)) return *v;
        return get_attribute(obj, key.text);
      }
      // Python's TypeError for an unhashable key is, to jinja2, a missing item.
      if (is_hashable(key))
        if (const Value* v = obj.dict->find(key)) return *v;
      break;
    default: break;
  }
  std::string why = obj.type_name();  // jinja2's wording: "list object has no element 5"
  why.append(" object has no element ").append(to_repr(key));
  return Value::undefined(std::move(why));
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (!obj.is_string() && !obj.is_list()) throw EvalError("cannot slice a " + obj.type_name());
  int64_t step = step_v.is_undefined() || step_v.is_none() ? 1 : step_v.as_int();
  if (step == 0) throw EvalError("slice step cannot be zero");
  std::vector<char32_t> chars;
  if (obj.is_string()) chars = decode_utf8(obj.text);
  WorkMeter::charge(obj.is_string() ? obj.text.size() * kDecodeWork : obj.list->size() * sizeof(Value));
  int64_t size = obj.is_string() ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(obj.list->size());
  int64_t start = 0, stop = 0;
  slice_indices(size, start_v, stop_v, step, start, stop);
  std::vector<char32_t> out_chars;
  ValueList out_items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (obj.is_string()) out_chars.push_back(chars[static_cast<size_t>(i)]);
    else out_items.push_back((*obj.list)[static_cast<size_t>(i)]);
  }
  if (obj.is_string()) return Value::from_string(encode_utf8(out_chars));
  return Value::from_list(std::move(out_items));
}

Value negate(const Value& v) {
  if (v.kind == Value::Kind::kFloat) return Value::from_float(-v.real);
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) overflow();
    return Value::from_int(-v.as_int());
  }
  throw EvalError("bad operand type for unary -: '" + v.type_name() + "'");
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value::from_string(to_str(a) + to_str(b));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    bool integral = a.is_integral() && b.is_integral();
    if (op == "/") {
      if (b.as_double() == 0) throw EvalError("division by zero");
      return Value::from_float(a.as_double() / b.as_double());
    }
    if (integral) {
      int64_t x = a.as_int(), y = b.as_int();
      if (op == "+") return Value::from_int(add(x, y));
      if (op == "-") return Value::from_int(sub(x, y));
      if (op == "*") return Value::from_int(mul(x, y));
      if ((op == "//" || op == "%") && y == 0) throw EvalError("integer division or modulo by zero");
      if (op == "//") return Value::from_int(floor_div(x, y));
      if (op == "%") return Value::from_int(x == INT64_MIN && y == -1 ? 0 : x - floor_div(x, y) * y);
      if (op == "**" && y >= 0) return Value::from_int(int_power(x, y));
    }
    double x = a.as_double(), y = b.as_double();
    if (op == "+") return Value::from_float(x + y);
    if (op == "-") return Value::from_float(x - y);
    if (op == "*") return Value::from_float(x * y);
    if (op == "**") return Value::from_float(std::pow(x, y));
    if (y == 0) throw EvalError("float division by zero");
    if (op == "//") return Value::from_float(std::floor(x / y));
    if (op == "%") {
      double r = std::fmod(x, y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value::from_float(r);
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) return Value::from_string(a.text + b.text);
  if (op == "%" && a.is_string()) return Value::from_string(py_percent_format(a.text, b));
  if (op == "+" && a.is_list() && b.is_list()) {
    ValueList out(*a.list);
    out.insert(out.end(), b.list->begin(), b.list->end());
    return Value::from_list(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.is_integral()) return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && a.is_integral()) return repeat(b, a.as_int());
  throw EvalError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    return a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.text.compare(b.text) < 0 ? -1 : a.text == b.text ? 0 : 1;
  if (a.is_list() && b.is_list()) {
    for (size_t i = 0; i < std::min(a.list->size(), b.list->size()); ++i) {
      int c = equals((*a.list)[i], (*b.list)[i]) ? 0 : compare((*a.list)[i], (*b.list)[i]);
      if (c != 0) return c;
    }
    return a.list->size() < b.list->size() ? -1 : a.list->size() > b.list->size() ? 1 : 0;
  }
  throw EvalError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string()) throw EvalError("'in <string>' requires string as left operand, not " + item.type_name());
      WorkMeter::charge(container.text.size());
      return container.text.find(item.text) != std::string::npos;
    case Value::Kind::kList:
      WorkMeter::charge(container.list->size() * sizeof(Value));
      return std::any_of(container.list->begin(), container.list->end(),
                         [&](const Value& v) { return equals(v, item); });
    case Value::Kind::kDict:
      check_hashable(item);
      return container.dict->find(item) != nullptr;
    default: throw EvalError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

int64_t length(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString:
      WorkMeter::charge(v.text.size() * kDecodeWork);
      return static_cast<int64_t>(decode_utf8(v.text).size());
    case Value::Kind::kList: return static_cast<int64_t>(v.list->size());
    case Value::Kind::kDict: return static_cast<int64_t>(v.dict->items.size());
    default: throw EvalError("object of type '" + v.type_name() + "' has no len()");
  }
}

ValueList iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList:
      WorkMeter::charge(v.list->size() * sizeof(Value));
      return *v.list;
    case Value::Kind::kString: {
      WorkMeter::charge(v.text.size() * sizeof(Value));
      const std::vector<char32_t> chars = decode_utf8(v.text);
      check_list_size(chars.size());
      ValueList out;
      for (char32_t c : chars) out.push_back(Value::from_string(encode_utf8({c})));
      return out;
    }
    case Value::Kind::kDict: {
      WorkMeter::charge(v.dict->items.size() * sizeof(Value));
      ValueList out;
      for (const auto& item : v.dict->items) out.push_back(item.first);
      return out;
    }
    default: throw EvalError("'" + v.type_name() + "' object is not iterable");
  }
}

}  // namespace exactly::jinja
