// Hugging Face safetensors checkpoints: one file (an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the bytes), or several shards behind a
// model.safetensors.index.json weight map. Memory-mapped and validated like
// GGUF: every range inside the file, sizes matching shapes, the tensors
// tiling the data exactly; any violation is a FileFormatError naming the file,
// the tensor and the offset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loader/mapped_file.h"

namespace exactly {

enum class SafetensorsDType { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

// Bytes per element; the name as the format spells it.
int safetensors_dtype_size(SafetensorsDType t);
const char* safetensors_dtype_name(SafetensorsDType t);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype;
  std::vector<int64_t> shape;
  const uint8_t* data;  // into the mapping
  int64_t size_bytes;
  int64_t file_offset;  // of the first byte, for error messages
};

class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // Parses bytes the caller keeps alive (tests, fuzzing).
  static std::unique_ptr<SafetensorsFile> parse(const uint8_t* bytes, size_t size, std::string name);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;  // null when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  void parse_all(const uint8_t* bytes, size_t size);

  std::string path_;
  std::unique_ptr<MappedFile> mapping_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// A whole checkpoint: a directory (model.safetensors.index.json, else
// model.safetensors), an index file, or a single .safetensors file. Every
// tensor the index names must be in the shard it names.
class SafetensorsCheckpoint {
 public:
  static std::unique_ptr<SafetensorsCheckpoint> open(const std::string& path);

  const SafetensorsTensor* find(std::string_view name) const;  // null when absent
  // Every tensor, in name order.
  std::vector<const SafetensorsTensor*> tensors() const;
  size_t num_shards() const { return shards_.size(); }
  // The path it was opened from (the index or the single file), for error messages.
  const std::string& path() const { return path_; }
  // The file of the shard that holds `t` (one of this checkpoint's tensors).
  const std::string& file_of(const SafetensorsTensor& t) const;

 private:
  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const SafetensorsTensor*, std::less<>> by_name_;
};

}  // namespace exactly
