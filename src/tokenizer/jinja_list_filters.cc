// jinja2's filters over sequences that sort, aggregate or regroup them:
// sort, dictsort, unique, min, max, sum, batch, slice and groupby. Items compare as
// Python compares them; strings compare lower-cased unless case_sensitive,
// as jinja2's defaults have it.
#include <algorithm>

#include "tokenizer/jinja_builtins.h"

namespace exactly::jinja {
namespace {

// `attribute` of an item as jinja2's attribute getters read it: dotted parts,
// each a key (or attribute), or an index when it is all digits.
Value lookup_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool index = !part.empty() && part.size() < 10 && std::all_of(part.begin(), part.end(), ::isdigit);
    v = index ? get_item(v, Value::from_int(std::stoll(part)))
        : v.is_dict() ? get_item(v, Value::from_string(part))
                      : get_attribute(v, part);
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// The sort key of an item: its attribute(s) (comma-separated ones make a
// tuple), strings lower-cased unless case-sensitive.
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  auto fold = [&](Value v) { return v.is_string() && !case_sensitive ? Value::from_string(py_lower(v.text)) : v; };
  if (attribute.is_undefined() || attribute.is_none()) return fold(item);
  const std::string path = to_str(attribute);
  if (path.find(',') == std::string::npos) return fold(lookup_path(item, path));
  ValueList parts;
  size_t start = 0;
  while (true) {
    const size_t comma = path.find(',', start);
    parts.push_back(fold(lookup_path(item, path.substr(start, comma == std::string::npos ? std::string::npos
                                                                                        : comma - start))));
    if (comma == std::string::npos) return Value::from_list(std::move(parts));
    start = comma + 1;
  }
}

// Items in the order of their keys; equal keys keep their order (also reversed, as Python's sorted does).
ValueList sorted_by(ValueList items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  WorkMeter::charge(items.size() * 20);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? compare(keys[b], keys[a]) < 0 : compare(keys[a], keys[b]) < 0;
  });
  ValueList out;
  for (size_t i : order) out.push_back(std::move(items[i]));
  return out;
}

bool flag(const CallArgs& args, size_t i, const std::string& name) { return args.get(i, name, Value::from_bool(false)).truthy(); }

int64_t positive_count(const Value& v, const char* what) {
  if (!v.is_integral() || v.as_int() < 1) throw EvalError(std::string(what) + " must be a positive integer");
  if (static_cast<uint64_t>(v.as_int()) > kMaxListItems) throw EvalError(std::string(what) + " is above the list bound");
  return v.as_int();
}

Value extreme(const Value& subject, const CallArgs& args, bool largest) {
  const ValueList items = iterate(subject);
  if (items.empty()) return Value::undefined("'No aggregated item, sequence was empty.'");
  const bool case_sensitive = flag(args, 0, "case_sensitive");
  const Value attribute = args.get(1, "attribute");
  size_t best = 0;
  Value best_key = sort_key(items[0], attribute, case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], attribute, case_sensitive);
    if (largest ? compare(best_key, key) < 0 : compare(key, best_key) < 0) best = i, best_key = std::move(key);
  }
  return items[best];
}

// groupby(attribute, default=None, case_sensitive=False): the items sorted
// by the attribute (`default` where an item lacks it), cut where it changes;
// each group a (grouper, list) tuple whose grouper is the first item's value,
// in its own case.
Value group_by(const Value& subject, const CallArgs& args) {
  const Value attribute = args.get(0, "attribute");
  const Value fallback = args.get(1, "default", Value::none());
  const bool case_sensitive = flag(args, 2, "case_sensitive");
  auto value_of = [&](const Value& item) {
    Value v = lookup_path(item, to_str(attribute));
    return v.is_undefined() && !fallback.is_none() ? fallback : v;
  };
  auto fold = [&](Value v) { return v.is_string() && !case_sensitive ? Value::from_string(py_lower(v.text)) : v; };
  ValueList items = iterate(subject);
  std::vector<Value> keys;
  for (const Value& item : items) keys.push_back(fold(value_of(item)));
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  WorkMeter::charge(items.size() * 20);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return compare(keys[a], keys[b]) < 0; });
  ValueList groups;
  for (size_t start = 0; start < order.size();) {
    size_t end = start + 1;
    while (end < order.size() && equals(keys[order[start]], keys[order[end]])) ++end;
    ValueList members;
    for (size_t i = start; i < end; ++i) members.push_back(items[order[i]]);
    Value group = Value::from_tuple({value_of(items[order[start]]), Value::from_list(std::move(members))});
    group.group = true;
    groups.push_back(std::move(group));
    start = end;
  }
  return Value::from_list(std::move(groups));
}

}  // namespace

bool is_list_filter(const std::string& name) {
  static const char* kFilters[] = {"sort", "dictsort", "unique", "min", "max", "sum", "batch", "slice", "groupby"};
  return std::any_of(std::begin(kFilters), std::end(kFilters), [&](const char* f) { return name == f; });
}

Value apply_list_filter(const std::string& name, const Value& subject, const CallArgs& args) {
  if (name == "sort") {
    ValueList items = iterate(subject);
    std::vector<Value> keys;
    for (const Value& item : items) keys.push_back(sort_key(item, args.get(2, "attribute"), flag(args, 1, "case_sensitive")));
    return Value::from_list(sorted_by(std::move(items), keys, flag(args, 0, "reverse")));
  }
  if (name == "dictsort") {
    if (!subject.is_dict()) throw EvalError("dictsort needs a mapping, got " + subject.type_name());
    const std::string by = to_str(args.get(1, "by", Value::from_string("key")));
    if (by != "key" && by != "value") throw EvalError("You can only sort by either \"key\" or \"value\"");
    ValueList items;
    std::vector<Value> keys;
    for (const auto& [k, v] : subject.dict->items) {
      items.push_back(Value::from_tuple({k, v}));
      keys.push_back(sort_key(by == "key" ? k : v, Value::undefined(), flag(args, 0, "case_sensitive")));
    }
    return Value::from_list(sorted_by(std::move(items), keys, flag(args, 2, "reverse")));
  }
  if (name == "unique") {
    const bool case_sensitive = flag(args, 0, "case_sensitive");
    const Value attribute = args.get(1, "attribute");
    ValueList out;
    std::vector<Value> seen;
    const ValueList items = iterate(subject);
    WorkMeter::charge(static_cast<uint64_t>(items.size()) * items.size());  // each key against the kept ones
    for (const Value& item : items) {
      Value key = sort_key(item, attribute, case_sensitive);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); }))
        seen.push_back(std::move(key)), out.push_back(item);
    }
    return Value::from_list(std::move(out));
  }
  if (name == "min" || name == "max") return extreme(subject, args, name == "max");
  if (name == "groupby") return group_by(subject, args);
  if (name == "sum") {
    const Value attribute = args.get(0, "attribute");
    Value total = args.get(1, "start", Value::from_int(0));
    for (const Value& item : iterate(subject))
      total = binary_op("+", total, attribute.is_undefined() || attribute.is_none() ? item
                                                                                    : lookup_path(item, to_str(attribute)));
    return total;
  }
  // batch(n, fill_with) cuts into lists of n; slice(k, fill_with) into k lists of near-equal length.
  const ValueList items = iterate(subject);
  const Value fill = args.get(1, "fill_with", Value::none());
  ValueList out;
  if (name == "batch") {
    const int64_t n = positive_count(args.get(0, "linecount"), "batch's linecount");
    for (size_t i = 0; i < items.size(); i += static_cast<size_t>(n)) {
      ValueList part(items.begin() + static_cast<long>(i),
                     items.begin() + static_cast<long>(std::min(items.size(), i + static_cast<size_t>(n))));
      while (!fill.is_none() && part.size() < static_cast<size_t>(n)) part.push_back(fill);
      out.push_back(Value::from_list(std::move(part)));
    }
    return Value::from_list(std::move(out));
  }
  const int64_t slices = positive_count(args.get(0, "slices"), "slice's count");
  const int64_t per = static_cast<int64_t>(items.size()) / slices, extra = static_cast<int64_t>(items.size()) % slices;
  WorkMeter::charge(static_cast<uint64_t>(slices));
  int64_t offset = 0;
  for (int64_t k = 0; k < slices; ++k) {
    const int64_t start = offset + k * per;
    if (k < extra) ++offset;
    const int64_t end = offset + (k + 1) * per;
    ValueList part(items.begin() + start, items.begin() + end);
    if (!fill.is_none() && k >= extra) part.push_back(fill);
    out.push_back(Value::from_list(std::move(part)));
  }
  return Value::from_list(std::move(out));
}

}  // namespace exactly::jinja
