/* C interface to the attention kernels, for test and benchmark harnesses in
 * other languages (the CUDA checks drive it from PyTorch through ctypes).
 * Every function returns 0 on success and -1 on error; exactly_last_error()
 * then says what was wrong. Pointers to tensors are host pointers for the
 * CPU functions and device pointers for the CUDA ones; index arrays of the
 * CUDA functions are device pointers too. */
#ifndef EXACTLY_KERNELS_CAPI_H
#define EXACTLY_KERNELS_CAPI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

const char* exactly_last_error(void);
int exactly_has_cuda(void);

/* CPU FlashAttention (fp32) over a paged cache, as used by the CPU engine. */
int exactly_cpu_attention(const float* k_cache, const float* v_cache, int64_t num_blocks, int block_size,
                          int n_kv_heads, int head_dim, int n_seqs, const int32_t* query_start,
                          const int32_t* seq_lens, const int32_t* block_tables, int max_blocks_per_seq,
                          const float* q, int n_heads, float scale, int causal, float* out, int n_threads);

/* dtype: 0 = bf16, 1 = fp16. stream: a cudaStream_t or NULL. */
int exactly_cuda_prefill(const void* k_cache, const void* v_cache, int64_t num_blocks, int block_size,
                         int n_kv_heads, int head_dim, int dtype, int n_seqs, const int32_t* query_start,
                         const int32_t* seq_lens, const int32_t* block_tables, int max_blocks_per_seq,
                         int max_query_len, int max_seq_len, const void* q, int n_heads, float scale, int causal,
                         void* out, void* stream);
int64_t exactly_cuda_decode_workspace_bytes(int n_seqs, int n_heads, int max_seq_len, int head_dim);
int exactly_cuda_decode(const void* k_cache, const void* v_cache, int64_t num_blocks, int block_size,
                        int n_kv_heads, int head_dim, int dtype, int n_seqs, const int32_t* query_start,
                        const int32_t* seq_lens, const int32_t* block_tables, int max_blocks_per_seq,
                        int max_seq_len, const void* q, int n_heads, float scale, void* out, void* workspace,
                        int64_t workspace_bytes, void* stream);
int exactly_cuda_kv_store(void* k_cache, void* v_cache, int64_t num_blocks, int block_size, int n_kv_heads,
                          int head_dim, int dtype, const void* k, const void* v, const int64_t* slot_mapping,
                          int64_t n_tokens, void* stream);
int exactly_cuda_copy_blocks(void* const* layer_k, void* const* layer_v, int n_layers, const int64_t* pairs,
                             int64_t n_pairs, int block_size, int n_kv_heads, int head_dim, int dtype,
                             void* stream);

#ifdef __cplusplus
}
#endif

#endif
