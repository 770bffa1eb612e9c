// What every paged attention kernel reads (the prefill kernels, split-KV
// decode, exact rows): the step's query rows, the cache and its block tables.
// Each kernel's parameters extend this with its own fields.
#pragma once

#include <cstdint>

#include "kernels/cuda/attention.h"

namespace exactly::kernels::cuda {

// T: the element type the kernel reads (void where the kernel casts per dtype).
template <typename T>
struct PagedAttentionParams {
  const T* q;                   // [tokens, n_heads, D]
  T* out;                       // [tokens, n_heads, D]
  const T* k_cache;             // [slots, n_kv_heads, D]
  const T* v_cache;             // [slots, n_kv_heads, D]
  const int32_t* query_start;   // [n_seqs + 1]
  const int32_t* seq_lens;      // [n_seqs]
  const int32_t* block_tables;  // [n_seqs, max_blocks_per_seq]
  int32_t max_blocks_per_seq;
  int32_t block_size;
  int32_t n_kv_heads;
  int32_t n_heads;
  int32_t group;     // query heads per KV head
  float scale_log2;  // softmax scale * log2(e): scores live in the exp2 domain
};

template <typename T>
PagedAttentionParams<T> paged_attention_params(const PagedKVDevice& c, const AttentionBatchDevice& b, const void* q,
                                               void* out, int n_heads, float scale) {
  return {static_cast<const T*>(q),
          static_cast<T*>(out),
          static_cast<const T*>(c.k),
          static_cast<const T*>(c.v),
          b.query_start,
          b.seq_lens,
          b.block_tables,
          b.max_blocks_per_seq,
          c.block_size,
          c.n_kv_heads,
          n_heads,
          n_heads / c.n_kv_heads,
          scale * 1.4426950408889634f};
}

}  // namespace exactly::kernels::cuda
