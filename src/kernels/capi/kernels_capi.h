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

/* CPU FlashAttention for training (fp32), over contiguous variable-length
 * batches: q, out, d_out, dq [cu_q[n_seqs], n_heads, head_dim]; k, v, dk, dv
 * [cu_k[n_seqs], n_kv_heads, head_dim]; lse [cu_q[n_seqs], n_heads] (natural
 * log, -inf for a query that sees no key). The causal mask aligns the ends:
 * query i of a sequence with Lq queries and Lk keys sees keys j <= i + Lk - Lq.
 * The forward saves lse; the backward recomputes the probabilities from it
 * and writes every element of dq, dk and dv, in a fixed reduction order. */
int exactly_cpu_flash_forward(const float* q, const float* k, const float* v, int n_seqs, const int32_t* cu_q,
                              const int32_t* cu_k, int n_heads, int n_kv_heads, int head_dim, float scale,
                              int causal, float* out, float* lse, int n_threads);
int exactly_cpu_flash_backward(const float* q, const float* k, const float* v, const float* out,
                               const float* d_out, const float* lse, int n_seqs, const int32_t* cu_q,
                               const int32_t* cu_k, int n_heads, int n_kv_heads, int head_dim, float scale,
                               int causal, float* dq, float* dk, float* dv, int n_threads);

/* dtype: 0 = bf16, 1 = fp16. stream: a cudaStream_t or NULL. q_rows: the
 * token rows q holds (at least query_start[n_seqs]). */
int exactly_cuda_prefill(const void* k_cache, const void* v_cache, int64_t num_blocks, int block_size,
                         int n_kv_heads, int head_dim, int dtype, int n_seqs, const int32_t* query_start,
                         const int32_t* seq_lens, const int32_t* block_tables, int max_blocks_per_seq,
                         int max_query_len, int max_seq_len, const void* q, int64_t q_rows, int n_heads,
                         float scale, int causal, void* out, void* stream);
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

/* CUDA FlashAttention for training (kernels/cuda/flash_train.h): the CPU
 * training functions' layout, causal rule and determinism, in bf16 or fp16
 * (dtype as above) with fp32 accumulation; head_dim 64 or 128. cu_q and cu_k
 * are device arrays; max_q_len and max_k_len bound every sequence's query and
 * key counts; lse is fp32. The backward's workspace (16-byte aligned) holds at
 * least exactly_cuda_flash_backward_workspace_bytes(n_seqs * max_q_len,
 * n_heads) bytes; a smaller one is refused. */
int exactly_cuda_flash_forward(const void* q, const void* k, const void* v, int n_seqs, const int32_t* cu_q,
                               const int32_t* cu_k, int max_q_len, int max_k_len, int n_heads, int n_kv_heads,
                               int head_dim, int dtype, float scale, int causal, void* out, float* lse, void* stream);
int64_t exactly_cuda_flash_backward_workspace_bytes(int64_t rows, int n_heads);
int exactly_cuda_flash_backward(const void* q, const void* k, const void* v, const void* out, const void* d_out,
                                const float* lse, int n_seqs, const int32_t* cu_q, const int32_t* cu_k, int max_q_len,
                                int max_k_len, int n_heads, int n_kv_heads, int head_dim, int dtype, float scale,
                                int causal, void* dq, void* dk, void* dv, void* workspace, int64_t workspace_bytes,
                                void* stream);

/* The layer operations of the CUDA model (kernels/cuda/layer_ops.h, gemm.h).
   gemm: out[n, m] = x[n, k] . w[m, k]^T (+ out when accumulate); x, w bf16;
   out_f32: 0 bf16 out, 1 fp32 out. path: 0 the streaming kernel up to 8 rows
   and cuBLASLt beyond, 1 cuBLASLt only, 2 cuBLASLt only with the
   deterministic algorithm. */
int exactly_cuda_gemm(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, int out_f32,
                      int accumulate, int path, void* stream);
/* The streaming few-row kernel alone (n <= 8). */
int exactly_cuda_gemv(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, int out_f32,
                      int accumulate, void* stream);
int exactly_cuda_rmsnorm(const float* x, const float* weight, const int32_t* rows, int64_t n, int dim, float eps,
                         void* out_bf16, void* stream);
/* layout: 0 adjacent pairs, 1 half split; bias may be NULL; the cache is bf16;
   angles: exactly_cuda_rope_angles' table for these positions, or NULL. */
int exactly_cuda_rope_store(const void* qkv, const float* bias, const int32_t* positions, const int64_t* slot_mapping,
                            int64_t n_tokens, int n_heads, int n_kv_heads, int head_dim, int rope_dims,
                            float freq_base, int layout, void* q_out, void* k_cache, void* v_cache,
                            int64_t num_blocks, int block_size, const void* angles, void* stream);
/* (cos, sin) fp32 pairs [n_tokens, rope_dims / 2] of each position's angles;
   divisors (fp32 [rope_dims / 2], or NULL) divide each pair's frequency and
   magnitude multiplies each cosine and sine (a scaled RoPE; 1: none). */
int exactly_cuda_rope_angles(const int32_t* positions, int64_t n_tokens, int rope_dims, float freq_base,
                             const float* divisors, float magnitude, void* out, void* stream);
int exactly_cuda_swiglu(const void* gate_up, int64_t n_tokens, int ffn_dim, void* out, void* stream);
/* GeGLU: out = bf16(gelu_tanh(gate) * up), gate_up bf16 [n_tokens, 2 ffn_dim]. */
int exactly_cuda_geglu(const void* gate_up, int64_t n_tokens, int ffn_dim, void* out, void* stream);
/* x[i] += rmsnorm(y[i]) * weight, fp32 [n, dim] (a sandwich norm's residual add). */
int exactly_cuda_add_rmsnorm(const float* y, const float* weight, int64_t n, int dim, float eps, float* x,
                             void* stream);
int exactly_cuda_argmax(const float* logits, int64_t rows, int vocab, int32_t* out, void* stream);

/* Samples one token per row of logits [rows, vocab] (fp32, overwritten with
   the processed logits) with the host sampler's semantics
   (kernels/cuda/sampling.h). params: rows SampleRowParams (48 bytes each,
   8-byte aligned); penalties: PenaltyEntry records (12 bytes each), may be
   NULL when no row has any; tokens: int32 [rows]; workspace: at least
   exactly_cuda_sampling_workspace_bytes(rows, vocab) bytes. All on the device. */
int64_t exactly_cuda_sampling_workspace_bytes(int64_t rows, int vocab);
int exactly_cuda_sample_rows(float* logits, int64_t rows, int vocab, const void* params, const void* penalties,
                             int32_t* tokens, void* workspace, void* stream);

/* Verifies speculative drafts by modified rejection sampling with the host's
   semantics (kernels/cuda/sampling.h, verify_drafts): logits [rows, vocab]
   (fp32, the claimed rows overwritten with the processed logits), params and
   penalties as for exactly_cuda_sample_rows (the uniform field unused); jobs:
   num_jobs VerifyJob records (24 bytes each); drafts: int32; q_offsets:
   int32; q_entries: DraftProb records (16 bytes each, 8-byte aligned), may
   be NULL when every draft distribution is empty; uniforms: double;
   accepted, tokens: int32 [num_jobs]; workspace: at least
   exactly_cuda_verify_workspace_bytes(rows, vocab) bytes. All on the device. */
int64_t exactly_cuda_verify_workspace_bytes(int64_t rows, int vocab);
int exactly_cuda_verify_drafts(float* logits, int64_t rows, int vocab, const void* params, const void* penalties,
                               const void* jobs, int num_jobs, const int32_t* drafts, const int32_t* q_offsets,
                               const void* q_entries, const double* uniforms, int32_t* accepted, int32_t* tokens,
                               void* workspace, void* stream);

#ifdef __cplusplus
}
#endif

#endif
