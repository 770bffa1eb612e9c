// Writes new keys and values into their paged-cache slots (plain copies, so
// what is read back is bit-identical to what was written).
#include <cstring>

#include "core/check.h"
#include "kernels/ops.h"

namespace exactly::kernels {

void kv_store(const PagedKV& cache, const float* k, const float* v, const int64_t* slot_mapping,
              int64_t n_tokens) {
  const int64_t token_elems = int64_t{cache.n_kv_heads} * cache.head_dim;
  const int64_t n_slots = cache.num_blocks * cache.block_size;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    EXACTLY_CHECK(slot >= 0 && slot < n_slots, "kv_store: slot %lld outside the cache of %lld slots",
                  static_cast<long long>(slot), static_cast<long long>(n_slots));
    // slot = block * block_size + offset, and blocks are contiguous slots.
    std::memcpy(cache.k + slot * token_elems, k + t * token_elems, sizeof(float) * static_cast<size_t>(token_elems));
    std::memcpy(cache.v + slot * token_elems, v + t * token_elems, sizeof(float) * static_cast<size_t>(token_elems));
  }
}

}  // namespace exactly::kernels
