// GGUFFile: mapping a file, and typed access to its metadata and tensors.
// Parsing and validation live in gguf_parse.cc.
#include "loader/gguf.h"

#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/format.h"

namespace exactly {

namespace {

[[noreturn]] void type_mismatch(const std::string& file, std::string_view key, const GGUFValue& v,
                                const char* expected) {
  throw FileFormatError(strformat("%s: key '%.*s' has type %s, expected %s", file.c_str(),
                                  static_cast<int>(key.size()), key.data(),
                                  std::string(gguf_value_type_name(v.type)).c_str(), expected));
}

[[noreturn]] void missing_key(const std::string& file, std::string_view key, const char* expected) {
  throw FileFormatError(strformat("%s: required key '%.*s' (%s) is missing", file.c_str(),
                                  static_cast<int>(key.size()), key.data(), expected));
}

// Integer value of `v`, or nullopt when `v` is not an integer type.
std::optional<int64_t> as_int(const std::string& file, std::string_view key, const GGUFValue& v) {
  if (const auto* s = std::get_if<int64_t>(&v.v)) return *s;
  if (const auto* u = std::get_if<uint64_t>(&v.v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw FileFormatError(strformat("%s: key '%.*s' value %llu does not fit in a signed 64-bit integer",
                                      file.c_str(), static_cast<int>(key.size()), key.data(),
                                      static_cast<unsigned long long>(*u)));
    return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}

std::optional<double> as_number(const GGUFValue& v) {
  if (const auto* d = std::get_if<double>(&v.v)) return *d;
  if (const auto* s = std::get_if<int64_t>(&v.v)) return static_cast<double>(*s);
  if (const auto* u = std::get_if<uint64_t>(&v.v)) return static_cast<double>(*u);
  return std::nullopt;
}

// The array stored under `key` if its elements are of an accepted type.
const GGUFArray* as_array(const std::string& file, std::string_view key, const GGUFValue& v,
                          bool (*accept)(GGUFValueType), const char* expected) {
  const auto* arr = std::get_if<std::shared_ptr<GGUFArray>>(&v.v);
  if (!arr || !accept((*arr)->elem_type)) {
    std::string got(gguf_value_type_name(v.type));
    if (arr) got += " of " + std::string(gguf_value_type_name((*arr)->elem_type));
    throw FileFormatError(strformat("%s: key '%.*s' has type %s, expected %s", file.c_str(),
                                    static_cast<int>(key.size()), key.data(), got.c_str(), expected));
  }
  return arr->get();
}

bool is_integer_type(GGUFValueType t) {
  switch (t) {
    case GGUFValueType::UINT8: case GGUFValueType::INT8: case GGUFValueType::UINT16:
    case GGUFValueType::INT16: case GGUFValueType::UINT32: case GGUFValueType::INT32:
    case GGUFValueType::UINT64: case GGUFValueType::INT64:
      return true;
    default:
      return false;
  }
}
bool is_numeric_type(GGUFValueType t) {
  return is_integer_type(t) || t == GGUFValueType::FLOAT32 || t == GGUFValueType::FLOAT64;
}
bool is_string_type(GGUFValueType t) { return t == GGUFValueType::STRING; }

}  // namespace

int64_t GGUFTensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // the parser rejected shapes whose product overflows
  return n;
}

std::unique_ptr<GGUFFile> GGUFFile::open(const std::string& path) {
  std::unique_ptr<MappedFile> mapping = MappedFile::open(path, "a GGUF model");
  std::unique_ptr<GGUFFile> f(new GGUFFile());
  f->path_ = path;
  f->base_ = mapping->data();
  f->size_ = mapping->size();
  f->mapping_ = std::move(mapping);  // owned from here on: unmapped even if parsing throws
  f->parse_all();
  return f;
}

std::unique_ptr<GGUFFile> GGUFFile::parse(const uint8_t* bytes, size_t size, std::string name) {
  std::unique_ptr<GGUFFile> f(new GGUFFile());
  f->path_ = std::move(name);
  f->base_ = bytes;
  f->size_ = size;
  f->parse_all();
  return f;
}

GGUFFile::~GGUFFile() = default;

const GGUFValue* GGUFFile::find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

std::optional<std::string> GGUFFile::get_string(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&v->v)) return *s;
  type_mismatch(path_, key, *v, "string");
}

std::optional<int64_t> GGUFFile::get_int(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto i = as_int(path_, key, *v)) return i;
  type_mismatch(path_, key, *v, "an integer");
}

std::optional<double> GGUFFile::get_float(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto d = as_number(*v)) return d;
  type_mismatch(path_, key, *v, "a number");
}

std::optional<bool> GGUFFile::get_bool(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  if (const auto* b = std::get_if<bool>(&v->v)) return *b;
  type_mismatch(path_, key, *v, "bool");
}

std::string GGUFFile::require_string(std::string_view key) const {
  if (auto s = get_string(key)) return *s;
  missing_key(path_, key, "string");
}

int64_t GGUFFile::require_int(std::string_view key) const {
  if (auto i = get_int(key)) return *i;
  missing_key(path_, key, "integer");
}

double GGUFFile::require_float(std::string_view key) const {
  if (auto d = get_float(key)) return *d;
  missing_key(path_, key, "number");
}

std::optional<std::vector<std::string>> GGUFFile::get_string_array(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  const GGUFArray* arr = as_array(path_, key, *v, is_string_type, "array of string");
  std::vector<std::string> out;
  out.reserve(arr->items.size());
  for (const auto& item : arr->items) out.push_back(std::get<std::string>(item.v));
  return out;
}

std::optional<std::vector<int64_t>> GGUFFile::get_int_array(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  const GGUFArray* arr = as_array(path_, key, *v, is_integer_type, "array of integers");
  std::vector<int64_t> out;
  out.reserve(arr->items.size());
  for (const auto& item : arr->items) out.push_back(*as_int(path_, key, item));
  return out;
}

std::optional<std::vector<float>> GGUFFile::get_float_array(std::string_view key) const {
  const GGUFValue* v = find(key);
  if (!v) return std::nullopt;
  const GGUFArray* arr = as_array(path_, key, *v, is_numeric_type, "array of numbers");
  std::vector<float> out;
  out.reserve(arr->items.size());
  for (const auto& item : arr->items) out.push_back(static_cast<float>(*as_number(item)));
  return out;
}

const GGUFTensorInfo* GGUFFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GGUFTensorInfo& GGUFFile::require_tensor(std::string_view name) const {
  if (const GGUFTensorInfo* t = find_tensor(name)) return *t;
  throw FileFormatError(strformat("%s: required tensor '%.*s' is missing", path_.c_str(),
                                  static_cast<int>(name.size()), name.data()));
}

}  // namespace exactly
