#include "loader/json_file.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/format.h"

namespace exactly {

using nlohmann::json;

JsonFile JsonFile::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileFormatError(strformat("%s: cannot open the file", path.c_str()));
  std::stringstream text;
  text << in.rdbuf();
  JsonFile file{path, {}};
  try {
    file.root = json::parse(text.str());
  } catch (const json::parse_error& e) {
    throw FileFormatError(strformat("%s: not valid JSON (%s)", path.c_str(), e.what()));
  }
  return file;
}

JsonObject::JsonObject(const std::string& path, const json& value, std::string where)
    : path_(path), value_(value), where_(std::move(where)) {
  if (!value_.is_object()) {
    throw FileFormatError(
        where_.empty()
            ? strformat("%s: the top level is %s, not a JSON object", path_.c_str(), value_.type_name())
            : strformat("%s: key '%s' is %s, not an object", path_.c_str(), where_.c_str(), value_.type_name()));
  }
}

std::string JsonObject::key_path(std::string_view key) const {
  return where_.empty() ? std::string(key) : where_ + "." + std::string(key);
}

void JsonObject::fail(std::string_view key, const std::string& problem) const {
  throw FileFormatError(strformat("%s: key '%s' %s", path_.c_str(), key_path(key).c_str(), problem.c_str()));
}

const json* JsonObject::find(std::string_view key) const {
  const auto it = value_.find(key);
  return it == value_.end() || it->is_null() ? nullptr : &*it;
}

const json& JsonObject::require(std::string_view key) const {
  const json* v = find(key);
  if (!v) fail(key, "is missing");
  return *v;
}

std::optional<int64_t> JsonObject::get_int(std::string_view key) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  // 4096.0 is an integer in Python's json too; anything fractional is not.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::trunc(d) == d && std::abs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  if (!v->is_number_integer()) fail(key, strformat("must be an integer, not %s", v->dump().c_str()));
  return v->get<int64_t>();
}

std::optional<double> JsonObject::get_number(std::string_view key) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(key, strformat("must be a number, not %s", v->dump().c_str()));
  return v->get<double>();
}

std::optional<bool> JsonObject::get_bool(std::string_view key) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(key, strformat("must be true or false, not %s", v->dump().c_str()));
  return v->get<bool>();
}

std::optional<std::string> JsonObject::get_string(std::string_view key) const {
  const json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail(key, strformat("must be a string, not %s", v->type_name()));
  return v->get<std::string>();
}

int64_t JsonObject::require_int(std::string_view key) const {
  require(key);
  return *get_int(key);
}

double JsonObject::require_number(std::string_view key) const {
  require(key);
  return *get_number(key);
}

std::string JsonObject::require_string(std::string_view key) const {
  require(key);
  return *get_string(key);
}

JsonObject JsonObject::object(std::string_view key) const { return JsonObject(path_, require(key), key_path(key)); }

}  // namespace exactly
