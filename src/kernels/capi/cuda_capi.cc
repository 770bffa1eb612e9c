// The CUDA half of the C interface: thin wrappers that build the launch
// structs and turn exactly::Error into -1.
#include "kernels/capi/kernels_capi.h"
#include "kernels/capi/last_error.h"
#include "kernels/cuda/attention.h"

namespace {
using namespace exactly::kernels::cuda;

PagedKVDevice cache_of(const void* k, const void* v, int64_t num_blocks, int block_size, int n_kv_heads,
                       int head_dim, int dtype) {
  return {const_cast<void*>(k), const_cast<void*>(v), num_blocks, block_size, n_kv_heads, head_dim,
          static_cast<DType>(dtype)};
}
cudaStream_t stream_of(void* s) { return static_cast<cudaStream_t>(s); }
}  // namespace

extern "C" int exactly_has_cuda(void) { return 1; }

extern "C" int exactly_cuda_prefill(const void* k_cache, const void* v_cache, int64_t num_blocks, int block_size,
                                    int n_kv_heads, int head_dim, int dtype, int n_seqs, const int32_t* query_start,
                                    const int32_t* seq_lens, const int32_t* block_tables, int max_blocks_per_seq,
                                    int max_query_len, int max_seq_len, const void* q, int n_heads, float scale,
                                    int causal, void* out, void* stream) {
  return exactly::capi::guarded([&] {
    const AttentionBatchDevice batch{n_seqs,           query_start,   seq_lens,   block_tables,
                                     max_blocks_per_seq, max_query_len, max_seq_len};
    flash_attention_prefill(cache_of(k_cache, v_cache, num_blocks, block_size, n_kv_heads, head_dim, dtype), batch,
                            q, n_heads, scale, causal != 0, out, stream_of(stream));
  });
}

extern "C" int64_t exactly_cuda_decode_workspace_bytes(int n_seqs, int n_heads, int max_seq_len, int head_dim) {
  return decode_workspace_bytes(n_seqs, n_heads, max_seq_len, head_dim);
}

extern "C" int exactly_cuda_decode(const void* k_cache, const void* v_cache, int64_t num_blocks, int block_size,
                                   int n_kv_heads, int head_dim, int dtype, int n_seqs, const int32_t* query_start,
                                   const int32_t* seq_lens, const int32_t* block_tables, int max_blocks_per_seq,
                                   int max_seq_len, const void* q, int n_heads, float scale, void* out,
                                   void* workspace, int64_t workspace_bytes, void* stream) {
  return exactly::capi::guarded([&] {
    const AttentionBatchDevice batch{n_seqs, query_start, seq_lens, block_tables, max_blocks_per_seq, 1,
                                     max_seq_len};
    paged_decode_attention(cache_of(k_cache, v_cache, num_blocks, block_size, n_kv_heads, head_dim, dtype), batch,
                           q, n_heads, scale, out, workspace, workspace_bytes, stream_of(stream));
  });
}

extern "C" int exactly_cuda_kv_store(void* k_cache, void* v_cache, int64_t num_blocks, int block_size,
                                     int n_kv_heads, int head_dim, int dtype, const void* k, const void* v,
                                     const int64_t* slot_mapping, int64_t n_tokens, void* stream) {
  return exactly::capi::guarded([&] {
    kv_store(cache_of(k_cache, v_cache, num_blocks, block_size, n_kv_heads, head_dim, dtype), k, v, slot_mapping,
             n_tokens, stream_of(stream));
  });
}

extern "C" int exactly_cuda_copy_blocks(void* const* layer_k, void* const* layer_v, int n_layers,
                                        const int64_t* pairs, int64_t n_pairs, int block_size, int n_kv_heads,
                                        int head_dim, int dtype, void* stream) {
  return exactly::capi::guarded([&] {
    copy_blocks(layer_k, layer_v, n_layers, pairs, n_pairs, block_size, n_kv_heads, head_dim,
                static_cast<DType>(dtype), stream_of(stream));
  });
}
