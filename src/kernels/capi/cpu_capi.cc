// The CPU half of the C interface: the engine's own FlashAttention, so the
// CUDA kernels can be checked against it on the same inputs.
#include <memory>
#include <string>

#include "core/error.h"
#include "core/format.h"
#include "core/thread_pool.h"
#include "kernels/capi/kernels_capi.h"
#include "kernels/capi/last_error.h"
#include "kernels/ops.h"

namespace exactly::capi {
std::string& last_error() {
  thread_local std::string message;
  return message;
}
}  // namespace exactly::capi

extern "C" const char* exactly_last_error(void) { return exactly::capi::last_error().c_str(); }

extern "C" int exactly_cpu_attention(const float* k_cache, const float* v_cache, int64_t num_blocks,
                                     int block_size, int n_kv_heads, int head_dim, int n_seqs,
                                     const int32_t* query_start, const int32_t* seq_lens,
                                     const int32_t* block_tables, int max_blocks_per_seq, const float* q,
                                     int n_heads, float scale, int causal, float* out, int n_threads) {
  return exactly::capi::guarded([&] {
    using namespace exactly::kernels;
    // The kernel's own checks abort (they guard the engine's invariants); a
    // foreign caller's mistakes are errors instead, found before the call.
    auto require = [](bool ok, const std::string& what) {
      if (!ok) throw exactly::Error("exactly_cpu_attention: " + what);
    };
    require(head_dim > 0 && block_size > 0 && num_blocks > 0 && n_seqs >= 0 && max_blocks_per_seq > 0,
            exactly::strformat("bad shape (head_dim %d, block_size %d, %lld blocks, %d sequences)", head_dim,
                               block_size, static_cast<long long>(num_blocks), n_seqs));
    require(n_kv_heads > 0 && n_heads > 0 && n_heads % n_kv_heads == 0,
            exactly::strformat("%d heads over %d KV heads", n_heads, n_kv_heads));
    for (int s = 0; s < n_seqs; ++s) {
      const int32_t q_len = query_start[s + 1] - query_start[s];
      require(q_len >= 0 && q_len <= seq_lens[s] &&
                  int64_t{seq_lens[s]} <= int64_t{max_blocks_per_seq} * block_size,
              exactly::strformat("sequence %d: %d queries, length %d, %d table entries", s, q_len, seq_lens[s],
                                 max_blocks_per_seq));
      for (int32_t b = 0; b < (seq_lens[s] + block_size - 1) / block_size; ++b) {
        const int32_t block = block_tables[int64_t{s} * max_blocks_per_seq + b];
        require(block >= 0 && block < num_blocks,
                exactly::strformat("sequence %d: block %d is %d, outside the pool", s, b, block));
      }
    }
    const PagedKV cache{const_cast<float*>(k_cache), const_cast<float*>(v_cache), num_blocks, block_size,
                        n_kv_heads, head_dim};
    const AttentionBatch batch{n_seqs, query_start, seq_lens, block_tables, max_blocks_per_seq};
    exactly::ThreadPool pool(n_threads > 0 ? n_threads : 1);
    attention(cache, batch, q, n_heads, scale, out, pool, causal ? AttentionMask::causal : AttentionMask::none);
  });
}
