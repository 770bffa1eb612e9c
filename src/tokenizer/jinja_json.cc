// Python's json.dumps, as Hugging Face's `tojson` filter calls it:
// tojson(ensure_ascii=False, indent=None, separators=None, sort_keys=False).
// Dict keys become strings as json.dumps makes them (1 -> "1", True ->
// "true", None -> "null"); a tuple key is refused, as json.dumps refuses it.
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja_builtins.h"

namespace exactly::jinja {
namespace {

void append_escape(std::string& out, char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp & 0xFFFF));
  out += buf;
}

std::string json_string(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  auto escape_ascii = [&](unsigned char c) {
    switch (c) {
      case '"': out += "\\\""; return;
      case '\\': out += "\\\\"; return;
      case '\n': out += "\\n"; return;
      case '\r': out += "\\r"; return;
      case '\t': out += "\\t"; return;
      case '\b': out += "\\b"; return;
      case '\f': out += "\\f"; return;
      default:
        if (c < 0x20) append_escape(out, c);
        else out += static_cast<char>(c);
    }
  };
  if (!ensure_ascii) {
    for (char c : s) {
      if (static_cast<unsigned char>(c) < 0x80) escape_ascii(static_cast<unsigned char>(c));
      else out += c;
    }
    return out + "\"";
  }
  for (char32_t cp : decode_utf8(s)) {
    if (cp < 0x80) {
      escape_ascii(static_cast<unsigned char>(cp));
    } else if (cp < 0x10000) {
      append_escape(out, cp);
    } else {  // a surrogate pair, as Python writes characters beyond the BMP
      const char32_t v = cp - 0x10000;
      append_escape(out, 0xD800 + (v >> 10));
      append_escape(out, 0xDC00 + (v & 0x3FF));
    }
  }
  return out + "\"";
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

// The text json.dumps writes for a dict key.
std::string json_key(const Value& key, bool ensure_ascii) {
  std::string text;
  switch (key.kind) {
    case Value::Kind::kString: return json_string(key.text, ensure_ascii);
    case Value::Kind::kFloat: text = json_float(key.real); break;
    case Value::Kind::kBool: text = key.boolean ? "true" : "false"; break;
    case Value::Kind::kNone: text = "null"; break;
    case Value::Kind::kInt: text = std::to_string(key.integer); break;
    default: throw EvalError("TypeError: keys must be str, int, float, bool or None, not " + key.type_name());
  }
  std::string quoted = "\"";  // built by appending: GCC 12 misreports "lit" + string as overlapping
  quoted.append(text).append("\"");
  return quoted;
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonOptions& options) : o_(options) {}

  void write(const Value& v, int depth) {
    switch (v.kind) {
      case Value::Kind::kNone: out_ += "null"; return;
      case Value::Kind::kBool: out_ += v.boolean ? "true" : "false"; return;
      case Value::Kind::kInt: out_ += std::to_string(v.integer); return;
      case Value::Kind::kFloat: out_ += json_float(v.real); return;
      case Value::Kind::kString: out_ += json_string(v.text, o_.ensure_ascii); return;
      case Value::Kind::kList: write_list(*v.list, depth); return;
      case Value::Kind::kDict: write_dict(*v.dict, depth); return;
      default: throw EvalError("TypeError: Object of type " + v.type_name() + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int level) {
    if (!o_.indent) return;
    out_ += '\n';
    for (int i = 0; i < level; ++i) append_bounded(out_, *o_.indent);
  }

  void write_list(const ValueList& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += o_.item_separator;
      newline(depth + 1);
      write(items[i], depth + 1);
      check_string_size(out_.size());
    }
    newline(depth);
    out_ += ']';
  }

  void write_dict(const ValueDict& dict, int depth) {
    if (dict.items.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<size_t> order(dict.items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (o_.sort_keys) {
      WorkMeter::charge(order.size() * 20);
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return compare(dict.items[a].first, dict.items[b].first) < 0; });
    }
    out_ += '{';
    for (size_t i = 0; i < order.size(); ++i) {
      const auto& [key, value] = dict.items[order[i]];
      if (i > 0) out_ += o_.item_separator;
      newline(depth + 1);
      out_ += json_key(key, o_.ensure_ascii);
      out_ += o_.key_separator;
      write(value, depth + 1);
      check_string_size(out_.size());
    }
    newline(depth);
    out_ += '}';
  }

  const JsonOptions& o_;
  std::string out_;
};

}  // namespace

std::string json_dumps(const Value& v, const JsonOptions& options) {
  JsonWriter writer(options);
  writer.write(v, 0);
  return writer.take();
}

std::string to_json(const Value& v, int indent, bool pretty) {
  JsonOptions options;
  if (pretty) {
    options.indent = std::string(static_cast<size_t>(indent), ' ');
    options.item_separator.assign(1, ',');  // assign, not = "lit": GCC 12 misreports the copy
  }
  return json_dumps(v, options);
}

// tojson(ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value tojson_filter(const Value& subject, const CallArgs& args) {
  JsonOptions options;
  options.ensure_ascii = args.get(0, "ensure_ascii", Value::from_bool(false)).truthy();
  const Value indent = args.get(1, "indent", Value::none());
  if (indent.is_string()) {
    if (indent.text.size() > 64) throw EvalError("tojson indent longer than 64 bytes");
    options.indent = indent.text;
  } else if (!indent.is_none()) {
    if (!indent.is_integral()) throw EvalError("tojson indent must be an integer or a string");
    if (indent.as_int() > 64) throw EvalError("tojson indent above 64");
    options.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
  }
  if (options.indent) options.item_separator.assign(1, ',');  // assign, not = "lit": GCC 12 misreports the copy
  const Value separators = args.get(2, "separators", Value::none());
  if (!separators.is_none()) {
    if (!separators.is_list() || separators.list->size() != 2 || !(*separators.list)[0].is_string() ||
        !(*separators.list)[1].is_string())
      throw EvalError("tojson separators must be two strings");
    options.item_separator = (*separators.list)[0].text;
    options.key_separator = (*separators.list)[1].text;
  }
  options.sort_keys = args.get(3, "sort_keys", Value::from_bool(false)).truthy();
  return Value::from_string(json_dumps(subject, options));
}

}  // namespace exactly::jinja
