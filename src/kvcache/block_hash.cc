#include "kvcache/block_hash.h"

namespace exactly {
namespace {

// splitmix64's finaliser: every input bit affects every output bit, so token
// sequences that differ anywhere land far apart.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens) {
  uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ull);
  for (int32_t token : tokens) {
    h = mix(h + 0x9e3779b97f4a7c15ull + static_cast<uint32_t>(token));
  }
  // The length goes in last so a block is never confused with a prefix of it.
  return mix(h ^ tokens.size());
}

}  // namespace exactly
