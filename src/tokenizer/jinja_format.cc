// Python's two string formattings as chat templates use them: `fmt % args`
// (and the `format` filter, which is the same) and str.format.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "tokenizer/jinja_builtins.h"

namespace exactly::jinja {
namespace {

// One %-conversion of `v`: flags, width and precision as given (precision < 0: none).
std::string convert(char type, const std::string& flags, int width, int precision, const Value& v) {
  std::string body;
  if (type == 's' || type == 'r') {
    body = type == 's' ? to_str(v) : to_repr(v);
    if (precision >= 0) body = encode_utf8([&] {
      auto cps = decode_utf8(body);
      cps.resize(std::min(cps.size(), static_cast<size_t>(precision)));
      return cps;
    }());
    const int pad = width - static_cast<int>(decode_utf8(body).size());
    if (pad > 0) body = flags.find('-') != std::string::npos ? body + std::string(pad, ' ') : std::string(pad, ' ') + body;
    return body;
  }
  if (type == 'c') {
    if (v.is_string() && decode_utf8(v.text).size() == 1) return v.text;
    if (!v.is_integral() || v.as_int() < 0 || v.as_int() > 0x10FFFF) throw EvalError("%c requires an int or a char");
    return encode_utf8({static_cast<char32_t>(v.as_int())});
  }
  if (!v.is_number()) throw EvalError(std::string("%") + type + " format: a real number is required, not " + v.type_name());
  std::string spec = "%";  // built by appending: GCC 12 misreports "lit" + string as overlapping
  spec.append(flags);
  if (width > 0) spec.append(std::to_string(width));
  if (precision >= 0) spec.append(".").append(std::to_string(precision));
  char buffer[512];
  if (type == 'd' || type == 'i' || type == 'x' || type == 'X' || type == 'o') {
    if (!v.is_integral() && !std::isfinite(v.as_double())) throw EvalError("cannot convert float to integer");
    const long long n = v.is_integral() ? v.as_int() : static_cast<long long>(std::trunc(v.as_double()));
    if (n < 0 && type != 'd' && type != 'i') throw EvalError("negative numbers in %x and %o are not supported here");
    const char conv = type == 'i' ? 'd' : type;
    std::snprintf(buffer, sizeof buffer, (spec + "ll" + conv).c_str(), n);
    return buffer;
  }
  if (std::string("eEfFgG").find(type) == std::string::npos) throw EvalError("unsupported format character");
  std::snprintf(buffer, sizeof buffer, (spec + type).c_str(), v.as_double());
  return buffer;
}

}  // namespace

std::string py_percent_format(const std::string& fmt, const Value& args) {
  const ValueList positional = args.is_list() && args.tuple ? *args.list : ValueList{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw EvalError("incomplete format");
    if (fmt[i] == '%') {
      out += '%';
      continue;
    }
    const Value* value = nullptr;
    Value named;
    if (fmt[i] == '(') {  // %(key)s: a key of the one mapping argument
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos || !args.is_dict()) throw EvalError("format requires a mapping");
      const Value* found = args.dict->find(fmt.substr(i + 1, close - i - 1));
      if (found == nullptr) throw EvalError("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      named = *found, value = &named, i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) flags += fmt[i++];
    int width = 0, precision = -1;
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])) && width < 100000) width = width * 10 + (fmt[i++] - '0');
    if (i < fmt.size() && fmt[i] == '.') {
      precision = 0;
      for (++i; i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])) && precision < 100000; ++i)
        precision = precision * 10 + (fmt[i] - '0');
    }
    if (width > 400 || precision > 400) throw EvalError("format width or precision above 400");
    if (i >= fmt.size() || std::string("sridxXoceEfFgG").find(fmt[i]) == std::string::npos)
      throw EvalError(i >= fmt.size() ? "incomplete format" : std::string("unsupported format character '") + fmt[i] + "'");
    if (value == nullptr) {
      if (next >= positional.size()) throw EvalError("not enough arguments for format string");
      value = &positional[next++];
    }
    append_bounded(out, convert(fmt[i], flags, width, precision, *value));
  }
  if (!args.is_dict() && next < positional.size()) throw EvalError("not all arguments converted during string formatting");
  return out;
}

std::string py_str_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else throw EvalError("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{', ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw EvalError("Single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos)
      throw EvalError("str.format fields with conversions, specs, attributes or indexes are not supported");
    Value v;
    if (field.empty()) {
      v = args.get(auto_index++, "");
      if (v.is_undefined()) throw EvalError("Replacement index " + std::to_string(auto_index - 1) + " out of range");
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t index = field.size() > 6 ? SIZE_MAX : std::stoul(field);
      if (index >= args.positional.size()) throw EvalError("Replacement index " + field + " out of range");
      v = args.positional[index];
    } else {
      v = args.get(SIZE_MAX, field);
      if (v.is_undefined()) throw EvalError("KeyError: '" + field + "'");
    }
    append_bounded(out, to_str(v));
    i = close;
  }
  return out;
}

}  // namespace exactly::jinja
