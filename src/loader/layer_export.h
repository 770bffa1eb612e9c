// A smaller model cut from a bigger one: its first L decoder layers, with the
// embedding, the final norm and the output head. A draft model for
// speculative decoding that shares the target's vocabulary by construction.
#pragma once

#include <cstdint>
#include <string>

#include "loader/gguf.h"

namespace exactly {

// Writes to `out_path` every tensor of `in` except those of layers >= layers
// ("blk.N.*", N >= layers), and every metadata value unchanged except
// "<arch>.block_count", which becomes `layers` (in its stored type). Tensor
// data keeps the file's general.alignment. Throws Error(kUsage) when `layers`
// is not in [1, block_count], FileFormatError when `in` has no block count.
void export_first_layers(const GGUFFile& in, int64_t layers, const std::string& out_path);

}  // namespace exactly
