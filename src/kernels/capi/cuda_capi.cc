// The CUDA half of the C interface: thin wrappers that build the launch
// structs and turn exactly::Error into -1.
#include "kernels/capi/kernels_capi.h"
#include "kernels/capi/last_error.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flash_train.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layer_ops.h"
#include "kernels/cuda/sampling.h"

#include <memory>

namespace {
using namespace exactly::kernels::cuda;

PagedKVDevice cache_of(const void* k, const void* v, int64_t num_blocks, int block_size, int n_kv_heads,
                       int head_dim, int dtype) {
  return {const_cast<void*>(k), const_cast<void*>(v), num_blocks, block_size, n_kv_heads, head_dim,
          static_cast<DType>(dtype)};
}
cudaStream_t stream_of(void* s) { return static_cast<cudaStream_t>(s); }

FlashTrainShape flash_train_shape(int n_seqs, const int32_t* cu_q, const int32_t* cu_k, int max_q_len, int max_k_len,
                                  int n_heads, int n_kv_heads, int head_dim, int dtype, int causal) {
  return {n_seqs, cu_q, cu_k, max_q_len, max_k_len, n_heads, n_kv_heads, head_dim, static_cast<DType>(dtype),
          causal != 0};
}
}  // namespace

extern "C" int exactly_has_cuda(void) { return 1; }

extern "C" int exactly_cuda_prefill(const void* k_cache, const void* v_cache, int64_t num_blocks, int block_size,
                                    int n_kv_heads, int head_dim, int dtype, int n_seqs, const int32_t* query_start,
                                    const int32_t* seq_lens, const int32_t* block_tables, int max_blocks_per_seq,
                                    int max_query_len, int max_seq_len, const void* q, int64_t q_rows, int n_heads,
                                    float scale, int causal, void* out, void* stream) {
  return exactly::capi::guarded([&] {
    const AttentionBatchDevice batch{n_seqs,           query_start,   seq_lens,   block_tables,
                                     max_blocks_per_seq, max_query_len, max_seq_len, q_rows};
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

extern "C" int exactly_cuda_flash_forward(const void* q, const void* k, const void* v, int n_seqs,
                                          const int32_t* cu_q, const int32_t* cu_k, int max_q_len, int max_k_len,
                                          int n_heads, int n_kv_heads, int head_dim, int dtype, float scale,
                                          int causal, void* out, float* lse, void* stream) {
  return exactly::capi::guarded([&] {
    const auto shape =
        flash_train_shape(n_seqs, cu_q, cu_k, max_q_len, max_k_len, n_heads, n_kv_heads, head_dim, dtype, causal);
    flash_train_forward(shape, scale, q, k, v, out, lse, stream_of(stream));
  });
}

extern "C" int64_t exactly_cuda_flash_backward_workspace_bytes(int64_t rows, int n_heads) {
  return flash_train_backward_workspace_bytes(rows, n_heads);
}

extern "C" int exactly_cuda_flash_backward(const void* q, const void* k, const void* v, const void* out,
                                           const void* d_out, const float* lse, int n_seqs, const int32_t* cu_q,
                                           const int32_t* cu_k, int max_q_len, int max_k_len, int n_heads,
                                           int n_kv_heads, int head_dim, int dtype, float scale, int causal, void* dq,
                                           void* dk, void* dv, void* workspace, int64_t workspace_bytes,
                                           void* stream) {
  return exactly::capi::guarded([&] {
    const auto shape =
        flash_train_shape(n_seqs, cu_q, cu_k, max_q_len, max_k_len, n_heads, n_kv_heads, head_dim, dtype, causal);
    flash_train_backward(shape, scale, q, k, v, out, d_out, lse, {dq, dk, dv}, workspace, workspace_bytes,
                         stream_of(stream));
  });
}

extern "C" int exactly_cuda_gemm(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, int out_f32,
                                 int accumulate, int path, void* stream) {
  return exactly::capi::guarded([&] {
    // One Gemm per path for the process: plans are chosen once per shape.
    // 0: fastest order, streaming kernel up to 8 rows; 1: fastest, cuBLASLt
    // only; 2: canonical order; 3: canonical, cuBLASLt only.
    static std::unique_ptr<Gemm> gemms[4];
    EXACTLY_CUDA_REQUIRE(path >= 0 && path <= 3, "gemm: path %d (0 to 3)", path);
    if (!gemms[path])
      gemms[path] = std::make_unique<Gemm>(path < 2 ? GemmOrder::kFastest : GemmOrder::kCanonical,
                                           path == 0 ? kGemvMaxRows : path == 2 ? -1 : 0);
    gemms[path]->run(x, w, out, n, m, k, out_f32 ? GemmOut::f32 : GemmOut::bf16, accumulate != 0, stream_of(stream));
  });
}

extern "C" int exactly_cuda_gemv(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, int out_f32,
                                 int accumulate, void* stream) {
  return exactly::capi::guarded([&] {
    gemv_bf16(x, w, out, n, m, k, out_f32 ? GemmOut::f32 : GemmOut::bf16, accumulate != 0, stream_of(stream));
  });
}

extern "C" int exactly_cuda_rmsnorm(const float* x, const float* weight, const int32_t* rows, int64_t n, int dim,
                                    float eps, void* out_bf16, void* stream) {
  return exactly::capi::guarded([&] { rmsnorm_bf16(x, weight, rows, n, dim, eps, out_bf16, stream_of(stream)); });
}

extern "C" int exactly_cuda_rope_store(const void* qkv, const float* bias, const int32_t* positions,
                                       const int64_t* slot_mapping, int64_t n_tokens, int n_heads, int n_kv_heads,
                                       int head_dim, int rope_dims, float freq_base, int layout, void* q_out,
                                       void* k_cache, void* v_cache, int64_t num_blocks, int block_size,
                                       const void* angles, void* stream) {
  return exactly::capi::guarded([&] {
    const RopeStoreArgs args{qkv, bias, positions, slot_mapping, n_tokens, n_heads, rope_dims, freq_base,
                             static_cast<RopeLayout>(layout), q_out, angles};
    rope_and_store(args, cache_of(k_cache, v_cache, num_blocks, block_size, n_kv_heads, head_dim, 0),
                   stream_of(stream));
  });
}

extern "C" int exactly_cuda_rope_angles(const int32_t* positions, int64_t n_tokens, int rope_dims, float freq_base,
                                        const float* divisors, float magnitude, void* out, void* stream) {
  return exactly::capi::guarded(
      [&] { rope_angles(positions, n_tokens, rope_dims, freq_base, out, stream_of(stream), divisors, magnitude); });
}

extern "C" int exactly_cuda_geglu(const void* gate_up, int64_t n_tokens, int ffn_dim, void* out, void* stream) {
  return exactly::capi::guarded([&] {
    gated_activation(gate_up, n_tokens, ffn_dim, out, GateActivation::kGeluTanh, stream_of(stream));
  });
}

extern "C" int exactly_cuda_add_rmsnorm(const float* y, const float* weight, int64_t n, int dim, float eps, float* x,
                                        void* stream) {
  return exactly::capi::guarded([&] { add_rmsnorm_f32(y, weight, n, dim, eps, x, stream_of(stream)); });
}

extern "C" int exactly_cuda_swiglu(const void* gate_up, int64_t n_tokens, int ffn_dim, void* out, void* stream) {
  return exactly::capi::guarded([&] { swiglu(gate_up, n_tokens, ffn_dim, out, stream_of(stream)); });
}

extern "C" int exactly_cuda_argmax(const float* logits, int64_t rows, int vocab, int32_t* out, void* stream) {
  return exactly::capi::guarded([&] { row_argmax(logits, rows, vocab, out, stream_of(stream)); });
}

extern "C" int64_t exactly_cuda_sampling_workspace_bytes(int64_t rows, int vocab) {
  return static_cast<int64_t>(sampling_workspace_bytes(rows, vocab));
}

extern "C" int exactly_cuda_sample_rows(float* logits, int64_t rows, int vocab, const void* params,
                                        const void* penalties, int32_t* tokens, void* workspace, void* stream) {
  return exactly::capi::guarded([&] {
    sample_rows(logits, rows, vocab, static_cast<const SampleRowParams*>(params),
                static_cast<const PenaltyEntry*>(penalties), tokens, workspace, stream_of(stream));
  });
}

extern "C" int64_t exactly_cuda_verify_workspace_bytes(int64_t rows, int vocab) {
  return static_cast<int64_t>(verify_workspace_bytes(rows, vocab));
}

extern "C" int exactly_cuda_verify_drafts(float* logits, int64_t rows, int vocab, const void* params,
                                          const void* penalties, const void* jobs, int num_jobs,
                                          const int32_t* drafts, const int32_t* q_offsets, const void* q_entries,
                                          const double* uniforms, int32_t* accepted, int32_t* tokens,
                                          void* workspace, void* stream) {
  return exactly::capi::guarded([&] {
    verify_drafts(logits, rows, vocab, static_cast<const SampleRowParams*>(params),
                  static_cast<const PenaltyEntry*>(penalties), static_cast<const VerifyJob*>(jobs), num_jobs, drafts,
                  q_offsets, static_cast<const DraftProb*>(q_entries), uniforms, accepted, tokens, workspace,
                  stream_of(stream));
  });
}
