// How many KV blocks fit in a memory budget, and the budget as people write it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace exactly {

// Whole blocks of `block_size` token slots of `bytes_per_token_slot` bytes
// (all layers, K and V) that fit in `bytes_budget`.
int32_t num_blocks_for_memory(int64_t bytes_budget, int64_t bytes_per_token_slot, int32_t block_size);

// "2GiB", "512MiB", "1.5GB", "4096" (bytes). Binary units KiB/MiB/GiB/TiB are
// powers of 1024, decimal units KB/MB/GB/TB powers of 1000; units ignore case
// and may follow a space. None for anything else, negative sizes included.
std::optional<int64_t> parse_byte_size(std::string_view text);

}  // namespace exactly
