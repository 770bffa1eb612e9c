// A memory-mapped, fully bounds-checked GGUF reader (format versions 2 and 3).
//
// Opening a file parses the header, every metadata key/value (all value types,
// nested arrays included) and every tensor info, and validates tensor data
// ranges against the file size. Any inconsistency throws FileFormatError with
// a message naming the key or tensor and the byte offset where reading failed.
// Tensor data is never copied: TensorInfo::data points into the mapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/ggml_types.h"
#include "loader/mapped_file.h"

namespace exactly {

enum class GGUFValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view gguf_value_type_name(GGUFValueType t);

struct GGUFValue;
struct GGUFArray {
  GGUFValueType elem_type;
  std::vector<GGUFValue> items;
};

// One metadata value. Integers keep their stored type; accessors convert.
struct GGUFValue {
  GGUFValueType type;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<GGUFArray>> v;
};

struct GGUFTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the contiguous (innermost) dimension
  GGMLType type;
  uint64_t offset;             // relative to the start of the data section
  uint64_t nbytes;             // size implied by shape and type
  const uint8_t* data;         // points into the mapping
  int64_t num_elements() const;
};

class GGUFFile {
 public:
  // Maps and parses `path`. Throws FileFormatError (exit code 2) on any defect.
  static std::unique_ptr<GGUFFile> open(const std::string& path);
  // Parses an in-memory image (used by the fuzzer and tests); `bytes` must outlive the object.
  static std::unique_ptr<GGUFFile> parse(const uint8_t* bytes, size_t size, std::string name);
  ~GGUFFile();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  size_t file_size() const { return size_; }
  const std::string& path() const { return path_; }

  const std::vector<std::pair<std::string, GGUFValue>>& metadata() const { return metadata_; }
  const GGUFValue* find(std::string_view key) const;

  // Typed accessors. A missing key gives nullopt from the `get_` forms and a
  // FileFormatError naming the key from the `require_` forms; a key present
  // with an incompatible type is a malformed file, so both forms throw then.
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;   // any integer type
  std::optional<double> get_float(std::string_view key) const;  // any numeric type
  std::optional<bool> get_bool(std::string_view key) const;
  std::string require_string(std::string_view key) const;
  int64_t require_int(std::string_view key) const;
  double require_float(std::string_view key) const;
  // Arrays of strings / integers / floats (token lists, merges, scores, types).
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;
  std::optional<std::vector<float>> get_float_array(std::string_view key) const;

  const std::vector<GGUFTensorInfo>& tensors() const { return tensors_; }
  const GGUFTensorInfo* find_tensor(std::string_view name) const;
  const GGUFTensorInfo& require_tensor(std::string_view name) const;

 private:
  GGUFFile() = default;
  void parse_all();

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<MappedFile> mapping_;  // set when the bytes are our own map of the file
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GGUFValue>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<GGUFTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Human-readable rendering of a value for `exactly info` (long arrays abbreviated).
std::string gguf_value_to_string(const GGUFValue& v, size_t max_items = 8);

}  // namespace exactly
