// Where a flattened query token sits: its sequence, its context position, and
// the address of a key/value in the paged cache. Shared by the attention
// kernel and its reference.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "kernels/ops.h"

namespace exactly::kernels::cpu {

struct QueryPlace {
  int32_t seq;  // index into the batch's sequences
  int32_t pos;  // context position; the token attends to keys 0..pos
};

inline QueryPlace place_query(const AttentionBatch& b, int64_t token) {
  // The sequence whose query range [query_start[s], query_start[s+1]) holds token.
  const int32_t* end = b.query_start + b.n_seqs + 1;
  const int32_t s = static_cast<int32_t>(std::upper_bound(b.query_start, end, token) - b.query_start) - 1;
  const int32_t n_new = b.query_start[s + 1] - b.query_start[s];
  const int32_t pos = b.seq_lens[s] - n_new + static_cast<int32_t>(token - b.query_start[s]);
  EXACTLY_CHECK(pos >= 0, "attention: sequence %d has %d new tokens but length %d", s, n_new, b.seq_lens[s]);
  return {s, pos};
}

// Row offset (in floats) of key/value `j` of sequence `seq`, KV head `kv_head`.
inline int64_t kv_offset(const PagedKV& c, const AttentionBatch& b, int32_t seq, int32_t j, int kv_head) {
  const int32_t block = b.block_tables[int64_t{seq} * b.max_blocks_per_seq + j / c.block_size];
  const int64_t slot = int64_t{block} * c.block_size + j % c.block_size;
  return (slot * c.n_kv_heads + kv_head) * c.head_dim;
}

inline void check_attention(const PagedKV& c, const AttentionBatch& b, int n_heads) {
  EXACTLY_CHECK(c.n_kv_heads > 0 && n_heads % c.n_kv_heads == 0, "attention: %d heads over %d KV heads", n_heads,
                c.n_kv_heads);
  for (int32_t s = 0; s < b.n_seqs; ++s)
    EXACTLY_CHECK(b.seq_lens[s] <= int64_t{b.max_blocks_per_seq} * c.block_size,
                  "attention: sequence %d of length %d exceeds its block table", s, b.seq_lens[s]);
}

}  // namespace exactly::kernels::cpu
