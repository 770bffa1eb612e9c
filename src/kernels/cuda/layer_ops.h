// The element-wise and row-wise operations of a decoder layer on the GPU:
// embedding lookup, RMSNorm, rotary embedding fused with the KV store, and
// SwiGLU. The residual stream stays in fp32; what feeds a matrix product is
// bf16. Every output row is computed by one thread block in a fixed order, so
// its bits never depend on the other rows of the batch.
//
// All pointers are device pointers; launches are asynchronous on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention.h"

namespace exactly::kernels::cuda {

enum class RopeLayout : int {
  kAdjacentPairs = 0,  // GGUF: pairs (2i, 2i+1)
  kHalfSplit = 1,      // Hugging Face: pairs (i, i + rope_dims/2)
};

// x[t, :] = table[tokens[t], :] (bf16 -> fp32) times `scale` (in fp32;
// Gemma's sqrt(dim)). Token ids are checked on the host before the pass;
// here an id outside [0, vocab) writes zeros.
void embedding_lookup(const void* table_bf16, const int32_t* tokens, int64_t n_tokens, int dim, int vocab,
                      float* x, cudaStream_t stream, float scale = 1.0f);

// out[t, :] = [table[tokens[t], :] | side[t, :]] (bf16, rows of 2 dim): a
// draft head's input. An id outside [0, vocab) gives a zero embedding.
void embed_beside_bf16(const void* table_bf16, const int32_t* tokens, const void* side_bf16, int64_t n_tokens, int dim,
                       int vocab, void* out_bf16, cudaStream_t stream);

// out[i, :] = bf16(x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight) with
// r = rows[i] (rows may be null: r = i). x fp32 [*, dim], out bf16 [n, dim].
void rmsnorm_bf16(const float* x, const float* weight, const int32_t* rows, int64_t n, int dim, float eps,
                  void* out_bf16, cudaStream_t stream);

// x[i, :] += y[i, :] / sqrt(mean(y[i, :]^2) + eps) * weight, all fp32 [n, dim]:
// a sub-layer's output normed before it joins the residual stream (Gemma 3's
// sandwich norms), with rmsnorm_bf16's sum of squares.
void add_rmsnorm_f32(const float* y, const float* weight, int64_t n, int dim, float eps, float* x,
                     cudaStream_t stream);

// logits[i] = cap * tanh(logits[i] / cap) for every finite one of n (a final
// soft cap).
void softcap_f32(float* logits, int64_t n, float cap, cudaStream_t stream);

struct RopeStoreArgs {
  const void* qkv;            // bf16 [n_tokens, (n_heads + 2 n_kv_heads) head_dim]: q | k | v
  const float* bias;          // [(n_heads + 2 n_kv_heads) head_dim] added first (Qwen2); may be null
  const int32_t* positions;   // [n_tokens]
  const int64_t* slot_mapping;  // [n_tokens]; a negative slot stores nothing
  int64_t n_tokens;
  int n_heads;
  int rope_dims;              // leading dims of each head that rotate (even)
  float freq_base;
  RopeLayout layout;
  void* q_out;                // bf16 [n_tokens, n_heads, head_dim]
  // (cos, sin) of every token's angles, fp32 [n_tokens, rope_dims / 2], from
  // rope_angles over the same positions; null: computed in the kernel.
  const void* angles = nullptr;
};
// Rotates q and k by pos * freq_base^(-2i/rope_dims) (angles in float64,
// cosine and sine rounded once to fp32, as the CPU kernel does), writes q to
// q_out and k, v into the paged cache through the slot mapping.
void rope_and_store(const RopeStoreArgs& args, const PagedKVDevice& cache, cudaStream_t stream);

// The cosines and sines of rope_and_store's angles for each position, the
// same bits it computes itself: a pass computes them once for all its
// layers. out: fp32 pairs [n_tokens, rope_dims / 2].
// A scaled RoPE (model/rope_scaling.h) gives `divisors` (device, fp32
// [rope_dims / 2]; null: none), each dividing its pair's frequency in
// float64, and `magnitude`, multiplying each rounded cosine and sine in fp32:
// the CPU kernels' order of operations, so both engines rotate alike.
void rope_angles(const int32_t* positions, int64_t n_tokens, int rope_dims, float freq_base, void* out,
                 cudaStream_t stream, const float* divisors = nullptr, float magnitude = 1.0f);

// Qwen3's per-head RMSNorm: every q and k head of every token, in place in
// the bf16 qkv rows [n_tokens, (n_heads + 2 n_kv_heads) head_dim], becomes
// bf16((x + bias) / sqrt(mean((x + bias)^2) + eps) * norm) with q_norm for q
// heads and k_norm for k heads; with a bias, V's heads become bf16(x + bias)
// (rope_and_store then runs without one). A head's sum runs in an order fixed
// by head_dim.
struct HeadNormArgs {
  void* qkv;
  const float* bias;     // [(n_heads + 2 n_kv_heads) head_dim] or null
  const float* q_norm;   // [head_dim]
  const float* k_norm;   // [head_dim]
  int64_t n_tokens;
  int n_heads, n_kv_heads, head_dim;
  float eps;
};
void head_rmsnorm(const HeadNormArgs& args, cudaStream_t stream);

// out[t, j] = bf16(silu(g) * u) with g = gate_up[t, j], u = gate_up[t, ffn + j].
void swiglu(const void* gate_up_bf16, int64_t n_tokens, int ffn_dim, void* out_bf16, cudaStream_t stream);
// The same with the gate `act`: silu, or GELU's tanh form (GeGLU).
enum class GateActivation { kSilu, kGeluTanh };
void gated_activation(const void* gate_up_bf16, int64_t n_tokens, int ffn_dim, void* out_bf16, GateActivation act,
                      cudaStream_t stream);

// out[r] = the lowest index of the largest value of logits[r, :] (fp32 [rows, vocab]);
// probability[r], unless null, that value's probability at temperature 1,
// 1 / sum_j exp(l_j - max) (1 for a row of -inf).
void row_argmax(const float* logits, int64_t rows, int vocab, int32_t* out, cudaStream_t stream,
                float* probability = nullptr);

// Fills n bf16 values with uniform draws in [-scale, scale) from a counter
// hash of (seed, index): random weights for benchmarks (--load-format dummy).
void fill_uniform_bf16(void* out, int64_t n, float scale, uint64_t seed, cudaStream_t stream);
void fill_f32(float* out, int64_t n, float value, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
