// Reading the JSON files of a Hugging Face checkpoint (config.json,
// tokenizer.json, tokenizer_config.json) with errors that name the file and
// the key, like the GGUF reader's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace exactly {

// A parsed JSON file. Throws FileFormatError naming the path when the file
// cannot be read or is not JSON.
struct JsonFile {
  std::string path;
  nlohmann::json root;

  static JsonFile read(const std::string& path);
};

// Typed access to one object of a JsonFile. `where` is the dotted key path of
// the object ("" for the root, "model" for tokenizer.json's model), so an
// error can say "tokenizer.json: key 'model.merges' ...".
class JsonObject {
 public:
  // Throws FileFormatError when `value` is not an object. `value` must outlive
  // this view (it is the JsonFile's tree).
  JsonObject(const std::string& path, const nlohmann::json& value, std::string where);

  // nullptr when the key is absent or null: JSON writers use both for "unset".
  const nlohmann::json* find(std::string_view key) const;
  const nlohmann::json& require(std::string_view key) const;

  int64_t require_int(std::string_view key) const;
  double require_number(std::string_view key) const;
  std::string require_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_number(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  JsonObject object(std::string_view key) const;  // a required nested object

  // "<path>: key '<where.key>' <problem>" as a FileFormatError.
  [[noreturn]] void fail(std::string_view key, const std::string& problem) const;
  std::string key_path(std::string_view key) const;
  const std::string& path() const { return path_; }
  const nlohmann::json& value() const { return value_; }

 private:
  std::string path_;
  const nlohmann::json& value_;
  std::string where_;
};

}  // namespace exactly
