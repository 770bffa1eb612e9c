// Backend-neutral operations of the forward pass, CPU implementations.
//
// Every op has a SIMD implementation (namespace kernels) and a scalar
// reference (namespace kernels::reference) that the tests compare against.
//
// Batch invariance: every op computes each output element with a reduction
// order that depends only on that element's own inputs — never on how many
// tokens are in the batch, which thread ran it, or where a tile boundary fell.
// The engine's bit-exact batching rests on this.
#pragma once

#include <cstdint>

#include "core/ggml_types.h"
#include "core/thread_pool.h"

namespace exactly::kernels {

// A weight matrix in its stored type: `rows` output features, each a
// contiguous row of `cols` input features (ggml's ne0 = cols, ne1 = rows).
struct WeightMatrix {
  GGMLType type;
  const void* data;  // [rows, row_bytes(cols)]
  int64_t rows;
  int64_t cols;
};

// Rows [first, first + count) of w, as a matrix of its own over the same bytes.
inline WeightMatrix row_slice(const WeightMatrix& w, int64_t first, int64_t count) {
  return {w.type, static_cast<const uint8_t*>(w.data) + first * ggml_row_bytes(w.type, w.cols), count, w.cols};
}

// y[t, r] = sum_c w[r, c] * x[t, c] for t < n_tokens, dequantising inside the
// kernel (no fp32 copy of the weights). x: [n_tokens, cols], y: [n_tokens, rows].
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// out[t, :] = x[t, :] / sqrt(mean(x[t, :]^2) + eps) * weight. x, out: [n_tokens, dim]; may alias.
void rmsnorm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out);

// Rotates adjacent pairs (x[2i], x[2i+1]) of the first `rope_dims` elements of
// every head by angle pos * freq_base^(-2i/rope_dims) (GGUF / ggml "normal" layout).
// x: [n_tokens, n_heads, head_dim], positions: [n_tokens].
void rope_adjacent(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                   int rope_dims, float freq_base);

// The same in two parts, so that a forward pass computes each token's angles
// once for all its layers: rope_angles fills cos/sin [n_tokens, rope_dims/2]
// (the values rope_adjacent uses), rope_adjacent_with rotates with them.
// freq_factors ([rope_dims/2], null: none) divide pair i's frequency, as
// Llama 3.1's rope_freqs do.
void rope_angles(const int32_t* positions, int64_t n_tokens, int rope_dims, float freq_base, float* cos_out,
                 float* sin_out, const float* freq_factors = nullptr);
void rope_adjacent_with(float* x, int64_t n_tokens, int n_heads, int head_dim, int rope_dims, const float* cos_in,
                        const float* sin_in);
// The half-split ("neox") layout with the same angles: pair i is
// (x[i], x[i + rope_dims/2]), as Hugging Face's checkpoints and the GGUF
// files of architectures whose converter does not permute q/k (Qwen3) have it.
void rope_half_with(float* x, int64_t n_tokens, int n_heads, int head_dim, int rope_dims, const float* cos_in,
                    const float* sin_in);

// out[i] = silu(gate[i]) * up[i] for i < n. out may alias gate.
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
// The same split over the pool's threads (every element computed alike).
void silu_mul(const float* gate, const float* up, int64_t n, float* out, ThreadPool& pool);

// out[i] = gelu_tanh(gate[i]) * up[i] (GeGLU with the tanh approximation of
// GELU, Gemma's gelu_pytorch_tanh) for i < n. out may alias gate.
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out, ThreadPool& pool);

// gpt-oss's clamped SwiGLU: with g = min(gate[i], limit) and
// u = clamp(up[i], -limit, limit), out[i] = (u + 1) * g * sigmoid(alpha * g).
// out may alias gate.
void clamped_swiglu_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);
void clamped_swiglu_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out,
                        ThreadPool& pool);

// y[i] += x[i] for i < n.
void add_inplace(float* y, const float* x, int64_t n);

// out[t, :] = dequantised row tokens[t] of the table. out: [n_tokens, table.cols].
void embedding_lookup(const WeightMatrix& table, const int32_t* tokens, int64_t n_tokens, float* out);

// The KV cache of one layer: fixed-size blocks of token slots in a pool.
struct PagedKV {
  float* k;        // [num_blocks, block_size, n_kv_heads, head_dim]
  float* v;        // [num_blocks, block_size, n_kv_heads, head_dim]
  int64_t num_blocks;
  int block_size;
  int n_kv_heads;
  int head_dim;
};

// Writes k, v of each token into its slot (slot = block * block_size + offset).
// k, v: [n_tokens, n_kv_heads, head_dim], slot_mapping: [n_tokens].
void kv_store(const PagedKV& cache, const float* k, const float* v, const int64_t* slot_mapping,
              int64_t n_tokens);

// Flattened-batch metadata for attention over paged KV.
struct AttentionBatch {
  int32_t n_seqs;
  const int32_t* query_start;   // [n_seqs + 1] offsets of each sequence's query tokens
  const int32_t* seq_lens;      // [n_seqs] context length (cached + new) of each sequence
  const int32_t* block_tables;  // [n_seqs, max_blocks_per_seq] physical block ids
  int32_t max_blocks_per_seq;
};

// Which keys a query sees: causal (keys 0..its own position) or all of its
// sequence's keys (none; not used by the engine's decoder models).
enum class AttentionMask { causal, none };

// Causal attention for a flattened batch: query token j of sequence s sits at
// context position seq_lens[s] - (query_start[s+1] - query_start[s]) + j and
// attends to keys 0..that position, read through the block table.
// q: [n_tokens, n_heads, head_dim], out: [n_tokens, n_heads, head_dim];
// query head h uses KV head h / (n_heads / n_kv_heads). scale = 1/sqrt(head_dim).
// FlashAttention (cpu/flash_*.h): tiled prefill, split-KV decode over fixed
// 512-key partitions; each output row's bits are independent of the batch,
// its chunk, its place in a tile and the thread count.
// window > 0 (sliding-window layers, causal only): a query at position p sees
// keys p - window + 1 .. p, as Hugging Face's and llama.cpp's sliding windows.
// sinks ([n_heads], gpt-oss): one learned logit per query head that joins
// every row's softmax denominator and carries no value, so a row's weights
// are exp(s_j) / (exp(sink) + sum_k exp(s_k)).
void attention(const PagedKV& cache, const AttentionBatch& batch, const float* q, int n_heads,
               float scale, float* out, ThreadPool& pool, AttentionMask mask = AttentionMask::causal,
               int32_t window = 0, const float* sinks = nullptr);

// Bytes of working memory attention() allocates for this batch on n_threads:
// per-thread tile buffers, independent of the sequence lengths, plus one small
// partial result per 512-key partition of split-KV (decode) tiles only.
int64_t attention_scratch_bytes(const PagedKV& cache, const AttentionBatch& batch, int n_heads, int n_threads,
                                AttentionMask mask = AttentionMask::causal, int32_t window = 0);

namespace reference {
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y);
void rmsnorm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out);
void rope_adjacent(float* x, const int32_t* positions, int64_t n_tokens, int n_heads, int head_dim,
                   int rope_dims, float freq_base);
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);
void clamped_swiglu_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);
void attention(const PagedKV& cache, const AttentionBatch& batch, const float* q, int n_heads,
               float scale, float* out, AttentionMask mask = AttentionMask::causal, int32_t window = 0,
               const float* sinks = nullptr);
}  // namespace reference

}  // namespace exactly::kernels
