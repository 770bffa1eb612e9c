// Operators, filters, tests and methods of the Jinja subset, with Python's
// semantics. They throw EvalError; the evaluator adds the template location.
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja_limits.h"
#include "tokenizer/jinja_value.h"

namespace exactly::jinja {

// ---- jinja_ops.cc: operators and element access ----
// obj.name: a dict key, a string or dict method, else Undefined (an error on Undefined).
Value get_attribute(const Value& obj, const std::string& name);
// obj[key]: list/string index (negative counts from the end), dict key; else Undefined.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on lists and strings; absent bounds are Undefined.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// + - * / // % ** and ~ (string concatenation of str() of both sides).
Value binary_op(const std::string& op, const Value& lhs, const Value& rhs);
Value negate(const Value& v);
// <0, 0, >0 for orderable pairs (numbers, strings, lists); throws otherwise.
int compare(const Value& a, const Value& b);
// Python `item in container`.
bool contains(const Value& container, const Value& item);
// Python len(); throws when the value has none.
int64_t length(const Value& v);
// Python iter(): list items, string characters, dict keys; Undefined is empty.
ValueList iterate(const Value& v);

// ---- jinja_json.cc: json.dumps ----
struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // one level's indentation; none: everything on one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonOptions& options);
Value tojson_filter(const Value& subject, const CallArgs& args);

// ---- jinja_filters.cc ----
Value apply_filter(const std::string& name, const Value& subject, const CallArgs& args);
bool apply_test(const std::string& name, const Value& subject, const CallArgs& args);
// Returns false when `name` is not a known test (so the caller can report it).
bool is_known_test(const std::string& name);
bool is_known_filter(const std::string& name);

// Markup escaping of & < > " ', as markupsafe's escape does it.
std::string html_escape(const std::string& text);

// ---- jinja_list_filters.cc: sort, dictsort, sum, min, max, unique, batch, slice, groupby ----
bool is_list_filter(const std::string& name);
Value apply_list_filter(const std::string& name, const Value& subject, const CallArgs& args);

// ---- jinja_text_filters.cc: striptags, wordcount, wordwrap, urlencode, xmlattr, pprint ----
bool is_text_filter(const std::string& name);
Value apply_text_filter(const std::string& name, const Value& subject, const CallArgs& args);

// ---- jinja_format.cc ----
// Python `fmt % args` (args a tuple of values, a mapping for %(key)s, or one value).
std::string py_percent_format(const std::string& fmt, const Value& args);
// Python fmt.format(*args, **kwargs) with plain fields: {}, {0}, {name}.
std::string py_str_format(const std::string& fmt, const CallArgs& args);

// ---- jinja_strings.cc: str methods, bound to `self` ----
bool is_string_method(const std::string& name);
Value call_string_method(const std::string& self, const std::string& name, const CallArgs& args);
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
std::string py_upper(const std::string& s);
std::string py_lower(const std::string& s);
std::string py_capitalize(const std::string& s);
std::string py_replace(const std::string& s, const std::string& old, const std::string& replacement, int64_t count);
// str.splitlines(): lines split at Python's line boundaries, the ends kept or not.
ValueList py_splitlines(const std::string& s, bool keep_ends);
// str.center / ljust / rjust to `width` code points with `fill`.
std::string py_pad(const std::string& s, int64_t width, const std::string& fill, char align);

}  // namespace exactly::jinja
