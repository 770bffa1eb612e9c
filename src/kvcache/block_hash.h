// The identity of a full block of tokens for prefix caching. Hashes form a
// chain (each block's hash covers its parent's hash), so equal hashes mean
// equal prefixes, not merely equal blocks.
#pragma once

#include <cstdint>
#include <span>

namespace exactly {

using BlockHash = uint64_t;

// The parent of a sequence's first block.
inline constexpr BlockHash kRootBlockHash = 0x6a09e667f3bcc908ull;

BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens);

}  // namespace exactly
