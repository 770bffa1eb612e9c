// The global names a chat template sees: jinja2's range, dict, namespace,
// joiner and cycler, and the raise_exception and strftime_now that Hugging
// Face adds.
#include "tokenizer/jinja_globals.h"

#include "tokenizer/jinja_builtins.h"

namespace exactly::jinja {
namespace {

Value range(CallArgs& args) {
  std::vector<int64_t> bounds;
  for (const Value& v : args.positional) {
    if (!v.is_integral()) throw EvalError("range() arguments must be integers");
    bounds.push_back(v.as_int());
  }
  if (bounds.empty() || bounds.size() > 3) throw EvalError("range expected 1 to 3 arguments");
  int64_t start = bounds.size() > 1 ? bounds[0] : 0;
  int64_t stop = bounds.size() > 1 ? bounds[1] : bounds[0];
  int64_t step = bounds.size() > 2 ? bounds[2] : 1;
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 100000) throw EvalError("range too big");  // jinja2's sandbox limit
    out.push_back(Value::from_int(i));
  }
  return Value::from_list(std::move(out));
}

// Python dict(*args, **kwargs): a mapping or a sequence of pairs, then the keywords.
ValueDict mapping_of(const CallArgs& args) {
  if (args.positional.size() > 1)
    throw EvalError("dict expected at most 1 argument, got " + std::to_string(args.positional.size()));
  ValueDict d;
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_mapping_like()) {
      for (const auto& [k, v] : source.dict->items) d.set(k, v);
    } else {
      for (const Value& pair : iterate(source)) {
        if (!pair.is_list() || pair.list->size() != 2)
          throw EvalError("dictionary update sequence element is not a pair");
        d.set((*pair.list)[0], (*pair.list)[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.set(k, v);
  return d;
}

// joiner(sep=", "): "" on the first call, `sep` on every later one.
Value joiner(CallArgs& args) {
  const std::string separator = to_str(args.get(0, "sep", Value::from_string(", ")));
  auto used = std::make_shared<bool>(false);
  return Value::from_function([separator, used](CallArgs&) {
    const bool first = !*used;
    *used = true;
    return Value::from_string(first ? "" : separator);
  });
}

// cycler(*items): next() gives the current item and moves on (back to the
// first after the last), current is the item next() gives next, reset()
// goes back to the first. The methods hold the attributes weakly: a strong
// reference would make a cycle of shared pointers, never freed.
Value cycler(CallArgs& args) {
  if (args.positional.empty()) throw EvalError("at least one item has to be provided");
  auto items = std::make_shared<const ValueList>(args.positional);
  auto position = std::make_shared<size_t>(0);
  auto attributes = std::make_shared<ValueDict>();
  std::weak_ptr<ValueDict> weak = attributes;
  auto move_to = [items, position, weak](size_t at) {
    *position = at;
    if (auto a = weak.lock()) a->set("current", (*items)[at]);
  };
  attributes->set("next", Value::from_function([items, position, move_to](CallArgs&) {
    const Value item = (*items)[*position];
    move_to((*position + 1) % items->size());
    return item;
  }));
  attributes->set("reset", Value::from_function([move_to](CallArgs&) {
    move_to(0);
    return Value::none();
  }));
  attributes->set("current", (*items)[0]);
  Value object = Value::new_object("Cycler", attributes);
  for (const Value& item : *items) object.holds_namespace |= item.holds_namespace;
  return object;
}

}  // namespace

Scope builtin_globals(const RenderOptions& options) {
  Scope g;
  g["range"] = Value::from_function(range);
  g["dict"] = Value::from_function([](CallArgs& args) { return Value::from_dict(mapping_of(args)); });
  g["namespace"] = Value::from_function([](CallArgs& args) { return Value::new_namespace(mapping_of(args)); });
  g["joiner"] = Value::from_function(joiner);
  g["cycler"] = Value::from_function(cycler);
  g["raise_exception"] = Value::from_function([](CallArgs& args) -> Value {
    throw EvalError(to_str(args.get(0, "message")));
  });
  std::optional<std::tm> fixed_now = options.now;
  g["strftime_now"] = Value::from_function([fixed_now](CallArgs& args) {
    std::tm now{};
    if (fixed_now) {
      now = *fixed_now;
    } else {
      std::time_t t = std::time(nullptr);
      localtime_r(&t, &now);
    }
    char buf[512];
    size_t n = std::strftime(buf, sizeof(buf), to_str(args.get(0, "format")).c_str(), &now);
    return Value::from_string(std::string(buf, n));
  });
  return g;
}

}  // namespace exactly::jinja
