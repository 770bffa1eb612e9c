// Values of the Jinja subset used by chat templates.
//
// Chat templates are written against Python's jinja2, so values follow Python:
// `{{ x }}` prints str(x) (None, True, ['a', 1], {'k': 'v'}), `==` treats
// True as 1, strings index by code point, and an undefined variable is a
// distinct value that prints as nothing but fails when used in arithmetic.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/format.h"
#include "tokenizer/jinja_limits.h"

namespace exactly::jinja {

struct Value;
struct CallArgs;

using ValueList = std::vector<Value>;

// Insertion-ordered map, like a Python dict. Keys are hashable values (str,
// int, float, bool, None, tuples of them) compared as Python compares them,
// so 1, 1.0 and True are one key; the first key given stays, as in Python.
struct ValueDict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  // Throws EvalError for an unhashable key (a list, a dict, Undefined).
  void set(Value key, Value value);
  void set(const std::string& key, Value value);
};

using Function = std::function<Value(CallArgs&)>;

struct Value {
  // kObject: an object of jinja2's own (cycler, recursive loop) with
  // attributes in `dict`, callable where `function` is set; `text` names its type.
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction, kObject };

  Kind kind = Kind::kUndefined;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0.0;
  std::string text;
  bool markup = false;                     // kString marked safe (jinja2's Markup): `escape` leaves it as it is
  std::shared_ptr<const ValueList> list;   // kList (also used for tuples)
  bool tuple = false;                      // kList built as a tuple: prints (a, b), never equals a list
  bool group = false;                      // a tuple from groupby: .grouper and .list name its two items
  std::shared_ptr<ValueDict> dict;         // kDict (treated as immutable), kNamespace (mutable), kObject
  std::shared_ptr<const Function> function;  // kFunction, and a callable kObject
  std::string undefined_name;              // why it is undefined, worded as jinja2 does
  // Lists and dicts nested in this value (0 for a scalar, 1 for a flat list),
  // counted when it is built; a namespace counts as one level whatever it
  // holds later, and holds no namespace itself, so the true depth stays
  // within twice kMaxValueDepth.
  int depth = 0;
  bool holds_namespace = false;            // a namespace is in it (or it is one)

  static Value undefined(std::string name = {});
  static Value none();
  static Value from_bool(bool b);
  static Value from_int(int64_t i);
  static Value from_float(double d);
  static Value from_string(std::string s);
  // These three throw EvalError past kMaxValueDepth or kMaxListItems;
  // new_namespace also when an attribute holds a namespace (a cycle of
  // namespaces could never be freed).
  static Value from_list(ValueList items);
  static Value from_tuple(ValueList items);
  static Value from_dict(ValueDict d);
  static Value new_namespace(ValueDict d);
  static Value from_function(Function f);
  // An object of type `type_name` with `attributes`; callable when `call` is set.
  static Value new_object(std::string type_name, std::shared_ptr<ValueDict> attributes, Function call = nullptr);
  // JSON nested deeper than kMaxJsonDepth is refused (Error): the conversion
  // and everything that walks a Value later recurse once per level.
  static constexpr int kMaxJsonDepth = kMaxValueDepth;
  template <class Json>
  static Value from_json(const Json& j, int depth = 0);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_dict() const { return kind == Kind::kDict; }
  bool is_mapping_like() const { return kind == Kind::kDict || kind == Kind::kNamespace; }
  // int, float and bool (bool is an int in Python).
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  bool is_integral() const { return kind == Kind::kInt || kind == Kind::kBool; }
  int64_t as_int() const { return kind == Kind::kBool ? (boolean ? 1 : 0) : integer; }
  double as_double() const { return kind == Kind::kFloat ? real : static_cast<double>(as_int()); }

  bool truthy() const;
  std::string type_name() const;
};

// Positional and keyword arguments of a call, as Python passes them.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The i-th positional argument, else the keyword `name`, else `fallback`.
  Value get(size_t i, const std::string& name, Value fallback = Value::undefined()) const;
};

// Python str(value); Undefined prints as "".
std::string to_str(const Value& v);
// Python repr(value), used inside lists and dicts.
std::string to_repr(const Value& v);
// Python float repr: shortest round-trip digits, "1.0", "1e+16", "inf".
std::string float_repr(double d);
// json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=False), the
// `tojson` filter that Hugging Face installs for chat templates
// (jinja_json.cc, with its other arguments).
std::string to_json(const Value& v, int indent, bool pretty);
// Throws EvalError unless `key` may be a dict key (Python's hash() accepts it).
void check_hashable(const Value& key);
bool is_hashable(const Value& key);
// Python ==.
bool equals(const Value& a, const Value& b);

// Python str as code points, for len(), indexing and slicing.
std::vector<char32_t> decode_utf8(const std::string& s);
std::string encode_utf8(const std::vector<char32_t>& cps);

template <class Json>
Value Value::from_json(const Json& j, int depth) {
  if (depth >= kMaxJsonDepth && (j.is_array() || j.is_object()))
    throw Error(strformat("a template value nests more than %d deep", kMaxJsonDepth), ExitCode::kBadInput);
  switch (j.type()) {
    case nlohmann::json::value_t::null: return none();
    case nlohmann::json::value_t::boolean: return from_bool(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return from_int(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return from_int(static_cast<int64_t>(j.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float: return from_float(j.template get<double>());
    case nlohmann::json::value_t::string: return from_string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      for (const auto& e : j) items.push_back(from_json(e, depth + 1));
      return from_list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      ValueDict d;
      for (auto it = j.begin(); it != j.end(); ++it)
        d.items.emplace_back(from_string(it.key()), from_json(it.value(), depth + 1));
      return from_dict(std::move(d));
    }
    default: return none();
  }
}

}  // namespace exactly::jinja
