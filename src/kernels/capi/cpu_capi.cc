// The CPU half of the C interface: the engine's own FlashAttention, so the
// CUDA kernels can be checked against it on the same inputs.
#include <memory>

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
    const PagedKV cache{const_cast<float*>(k_cache), const_cast<float*>(v_cache), num_blocks, block_size,
                        n_kv_heads, head_dim};
    const AttentionBatch batch{n_seqs, query_start, seq_lens, block_tables, max_blocks_per_seq};
    exactly::ThreadPool pool(n_threads > 0 ? n_threads : 1);
    attention(cache, batch, q, n_heads, scale, out, pool, causal ? AttentionMask::causal : AttentionMask::none);
  });
}
