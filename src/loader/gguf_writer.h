// Writes GGUF version 3 files: metadata as the reader parsed it (every value
// keeps its stored type, so a value read and written back is byte-identical)
// and tensors whose data is placed at offsets aligned to the file's
// general.alignment (32 when absent), the data section itself aligned too.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loader/gguf.h"

namespace exactly {

struct GGUFTensorToWrite {
  std::string name;
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the contiguous dimension
  GGMLType type;
  std::span<const uint8_t> data;  // [nbytes] stored bytes, exactly what shape and type imply
};

// Writes to `path` through a temporary file renamed into place, so a failed
// write never leaves a truncated model behind. Throws Error naming the file
// when it cannot be written.
void write_gguf(const std::string& path, const std::vector<std::pair<std::string, GGUFValue>>& metadata,
                const std::vector<GGUFTensorToWrite>& tensors);

}  // namespace exactly
