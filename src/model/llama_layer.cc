#include "model/llama_layer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/collective.h"

namespace exactly {

void add_bias(float* x, const float* bias, int64_t n, int64_t width) {
  if (bias == nullptr) return;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < width; ++i) x[t * width + i] += bias[i];
}

void sum_over_ranks(const LayerBuffers& b, int64_t n, const ModelConfig& c) {
  if (b.shard != nullptr) b.shard->collective->all_reduce_sum(b.proj, n * c.dim, b.shard->rank);
}

void gate_activation(const ModelConfig& c, float* gate, const float* up, int64_t n, ThreadPool& pool) {
  switch (c.activation) {
    case MlpActivation::kSilu: return kernels::silu_mul(gate, up, n, gate, pool);
    case MlpActivation::kGeluTanh: return kernels::gelu_tanh_mul(gate, up, n, gate, pool);
    case MlpActivation::kClampedSwiglu:
      return kernels::clamped_swiglu_mul(gate, up, n, c.swiglu_alpha, c.swiglu_limit, gate, pool);
  }
}

void attention_block(const LlamaLayerWeights& L, const ModelConfig& c, int64_t n, const LayerBuffers& b,
                     const LayerKV& kv, ThreadPool& pool) {
  const float scale = c.attention_scale > 0 ? c.attention_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  kernels::matmul(L.wq, b.h, n, b.q, pool);
  kernels::matmul(L.wk, b.h, n, b.k, pool);
  kernels::matmul(L.wv, b.h, n, b.v, pool);
  if (L.q_bias != nullptr) {
    add_bias(b.q, L.q_bias, n, int64_t{c.n_heads} * c.head_dim);
    add_bias(b.k, L.k_bias, n, int64_t{c.n_kv_heads} * c.head_dim);
    add_bias(b.v, L.v_bias, n, int64_t{c.n_kv_heads} * c.head_dim);
  }
  if (c.qk_norm) {  // rows of head_dim: one per token and head
    kernels::rmsnorm(b.q, L.q_norm, n * c.n_heads, c.head_dim, c.rms_eps, b.q);
    kernels::rmsnorm(b.k, L.k_norm, n * c.n_kv_heads, c.head_dim, c.rms_eps, b.k);
  }
  const auto rope = c.rope_layout == RopeLayout::kHalfSplit ? kernels::rope_half_with : kernels::rope_adjacent_with;
  if (b.rope_cos != nullptr) {  // null: a layer that applies no RoPE (SmolLM3's NoPE layers)
    rope(b.q, n, c.n_heads, c.head_dim, c.rope_dims, b.rope_cos, b.rope_sin);
    rope(b.k, n, c.n_kv_heads, c.head_dim, c.rope_dims, b.rope_cos, b.rope_sin);
  }
  kernels::kv_store(kv.cache, b.k, b.v, kv.slots, n);
  kernels::attention(kv.cache, kv.batch, b.q, c.n_heads, scale, b.attn, pool, kernels::AttentionMask::causal,
                     kv.window, L.sinks);
  kernels::matmul(L.wo, b.attn, n, b.proj, pool);
  add_bias(b.proj, L.o_bias, n, c.dim);
}

void mlp_block(const LlamaLayerWeights& L, const ModelConfig& c, int64_t n, const LayerBuffers& b, ThreadPool& pool) {
  if (c.n_experts > 0) {
    moe_mlp(L.moe, c, b.h, n, b.proj, *b.moe, pool);
    return;
  }
  kernels::matmul(L.w_gate, b.h, n, b.gate, pool);
  kernels::matmul(L.w_up, b.h, n, b.up, pool);
  gate_activation(c, b.gate, b.up, n * c.ffn_dim, pool);
  kernels::matmul(L.w_down, b.gate, n, b.proj, pool);
}

void llama_layer(const LlamaLayerWeights& L, const ModelConfig& c, float* x, int64_t n, const LayerBuffers& b,
                 const LayerKV& kv, ThreadPool& pool) {
  kernels::rmsnorm(x, L.attn_norm, n, c.dim, c.rms_eps, b.h);
  attention_block(L, c, n, b, kv, pool);
  sum_over_ranks(b, n, c);
  kernels::add_inplace(x, b.proj, n * c.dim);
  kernels::rmsnorm(x, L.ffn_norm, n, c.dim, c.rms_eps, b.h);
  mlp_block(L, c, n, b, pool);
  sum_over_ranks(b, n, c);
  kernels::add_inplace(x, b.proj, n * c.dim);
}

void output_logits(const kernels::WeightMatrix& head, std::span<const int32_t> token_ids, int32_t vocab,
                   const float* normed, int64_t n_out, float* logits, int32_t* argmax, AlignedVector<float>& scratch,
                   ThreadPool& pool, float softcap) {
  if (token_ids.empty()) {
    kernels::matmul(head, normed, n_out, logits, pool);
  } else {
    const auto rows = static_cast<int64_t>(token_ids.size());
    if (static_cast<int64_t>(scratch.size()) < n_out * rows) scratch.resize(static_cast<size_t>(n_out * rows));
    kernels::matmul(head, normed, n_out, scratch.data(), pool);
    pool.parallel_for(n_out, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        float* row = logits + i * vocab;
        std::fill(row, row + vocab, -std::numeric_limits<float>::infinity());
        const float* part = scratch.data() + i * rows;
        for (int64_t r = 0; r < rows; ++r) row[token_ids[static_cast<size_t>(r)]] = part[r];
      }
    });
  }
  cap_and_argmax(logits, n_out, vocab, softcap, argmax, pool);
}

void cap_and_argmax(float* logits, int64_t n_out, int32_t vocab, float softcap, int32_t* argmax, ThreadPool& pool) {
  if (softcap > 0)
    pool.parallel_for(n_out, 1, [&](int64_t i0, int64_t i1) {
      for (float* v = logits + i0 * vocab; v < logits + i1 * vocab; ++v)
        if (std::isfinite(*v)) *v = softcap * std::tanh(*v / softcap);
    });
  if (argmax != nullptr)
    pool.parallel_for(n_out, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const float* row = logits + i * vocab;
        int32_t best = 0;
        for (int32_t v = 1; v < vocab; ++v)
          if (row[v] > row[best]) best = v;
        argmax[i] = best;
      }
    });
}

}  // namespace exactly
