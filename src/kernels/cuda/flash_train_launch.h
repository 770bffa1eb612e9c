// What the training FlashAttention's launchers share (flash_train.h): the
// kernels' parameters, the host-side argument checks, the dispatch on element
// type and head dimension, and the backward's two gradient launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flash_train.h"
#include "kernels/cuda/launch_common.h"

namespace exactly::kernels::cuda::flash_train {

// What every pass reads. Pointers are typed void: each kernel casts to its T.
struct VarlenParams {
  const void* q;  // [total_q, n_heads, D]
  const void* k;  // [total_k, n_kv_heads, D]
  const void* v;  // [total_k, n_kv_heads, D]
  const int32_t* cu_q;
  const int32_t* cu_k;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t group;     // query heads per KV head
  float scale;       // the softmax scale
  float scale_log2;  // scale * log2(e): scores live in the exp2 domain
  bool causal;
};

struct ForwardParams : VarlenParams {
  void* out;   // [total_q, n_heads, D]
  float* lse;  // [total_q, n_heads]
};

struct BackwardParams : VarlenParams {
  const void* out;     // [total_q, n_heads, D]
  const void* d_out;   // [total_q, n_heads, D]
  const float* lse;    // [total_q, n_heads]
  float* delta;        // [delta_rows, n_heads]: D = rowsum(dO * O)
  int64_t delta_rows;  // query rows the workspace holds
  void* dq;
  void* dk;
  void* dv;
};

inline VarlenParams varlen_params(const FlashTrainShape& s, float scale, const void* q, const void* k, const void* v) {
  return {q,
          k,
          v,
          s.cu_q,
          s.cu_k,
          s.n_heads,
          s.n_kv_heads,
          s.n_heads / s.n_kv_heads,
          scale,
          scale * 1.4426950408889634f,
          s.causal};
}

// Everything the kernels assume of the shape, with the offending value named.
inline void check_shape(const FlashTrainShape& s, float scale, const char* op) {
  EXACTLY_CUDA_REQUIRE(s.head_dim == 64 || s.head_dim == 128, "%s: head_dim %d (supported: 64, 128)", op, s.head_dim);
  EXACTLY_CUDA_REQUIRE(s.dtype == DType::bf16 || s.dtype == DType::f16, "%s: unknown dtype %d", op,
                       static_cast<int>(s.dtype));
  EXACTLY_CUDA_REQUIRE(s.n_kv_heads > 0 && s.n_heads > 0 && s.n_heads % s.n_kv_heads == 0,
                       "%s: %d query heads over %d KV heads", op, s.n_heads, s.n_kv_heads);
  EXACTLY_CUDA_REQUIRE(s.n_heads <= 65535, "%s: %d query heads (at most 65535)", op, s.n_heads);
  EXACTLY_CUDA_REQUIRE(s.n_seqs >= 0 && s.n_seqs <= 65535, "%s: %d sequences (at most 65535 per launch)", op, s.n_seqs);
  EXACTLY_CUDA_REQUIRE(s.max_q_len >= 0 && s.max_k_len >= 0, "%s: max_q_len %d, max_k_len %d", op, s.max_q_len,
                       s.max_k_len);
  EXACTLY_CUDA_REQUIRE(s.n_seqs == 0 || (s.cu_q != nullptr && s.cu_k != nullptr), "%s: cu_q and cu_k are required", op);
  EXACTLY_CUDA_REQUIRE(std::isfinite(scale), "%s: scale %g is not finite", op, static_cast<double>(scale));
}

// Tiles are copied 16 bytes at a time, so every row must start on 16 bytes.
inline void check_rows(const void* p, const char* name, const char* op) {
  EXACTLY_CUDA_REQUIRE(p != nullptr && aligned16(p), "%s: %s is null or not 16-byte aligned", op, name);
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with the 16-bit element type of `dtype`.
template <typename F>
void with_element_type(DType dtype, F&& f) {
  if (dtype == DType::bf16) return f(TypeTag<__nv_bfloat16>{});
  f(TypeTag<__half>{});
}

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

// dK and dV: a CTA per (sequence, KV head, 64-key tile) (flash_train_dkdv.cu).
void launch_key_tile_gradients(const BackwardParams& p, const FlashTrainShape& s, cudaStream_t stream);
// dQ: a CTA per (sequence, query head, 64-query tile) (flash_train_dq.cu).
void launch_query_tile_gradients(const BackwardParams& p, const FlashTrainShape& s, cudaStream_t stream);

}  // namespace exactly::kernels::cuda::flash_train
