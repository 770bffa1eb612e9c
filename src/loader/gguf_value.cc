// Names and human-readable rendering of GGUF metadata values.
#include <charconv>

#include "core/format.h"
#include "loader/gguf.h"

namespace exactly {

std::string_view gguf_value_type_name(GGUFValueType t) {
  switch (t) {
    case GGUFValueType::UINT8: return "uint8";
    case GGUFValueType::INT8: return "int8";
    case GGUFValueType::UINT16: return "uint16";
    case GGUFValueType::INT16: return "int16";
    case GGUFValueType::UINT32: return "uint32";
    case GGUFValueType::INT32: return "int32";
    case GGUFValueType::FLOAT32: return "float32";
    case GGUFValueType::BOOL: return "bool";
    case GGUFValueType::STRING: return "string";
    case GGUFValueType::ARRAY: return "array";
    case GGUFValueType::UINT64: return "uint64";
    case GGUFValueType::INT64: return "int64";
    case GGUFValueType::FLOAT64: return "float64";
  }
  return "unknown";
}

namespace {

// Strings are raw bytes from the file: control characters are escaped so a
// hostile value cannot garble a terminal; other bytes pass through.
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += strformat("\\x%02x", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Shortest text that reads back as the same value in the stored precision,
// so 1e-5 stored as float32 prints as 1e-05, not 9.99999975e-06.
std::string shortest(double d, bool single) {
  char buf[64];
  auto res = single ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(d))
                    : std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, res.ptr);
}

}  // namespace

std::string gguf_value_to_string(const GGUFValue& v, size_t max_items) {
  if (const auto* u = std::get_if<uint64_t>(&v.v)) return std::to_string(*u);
  if (const auto* s = std::get_if<int64_t>(&v.v)) return std::to_string(*s);
  if (const auto* d = std::get_if<double>(&v.v)) return shortest(*d, v.type == GGUFValueType::FLOAT32);
  if (const auto* b = std::get_if<bool>(&v.v)) return *b ? "true" : "false";
  if (const auto* str = std::get_if<std::string>(&v.v)) return quote(*str);
  const auto& arr = *std::get<std::shared_ptr<GGUFArray>>(v.v);
  std::string out = "[";
  const size_t shown = std::min(max_items, arr.items.size());
  for (size_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    out += gguf_value_to_string(arr.items[i], max_items);
  }
  if (shown < arr.items.size())
    out += strformat("%s... (%zu %s items)", shown ? ", " : "", arr.items.size(),
                     std::string(gguf_value_type_name(arr.elem_type)).c_str());
  return out + "]";
}

}  // namespace exactly
