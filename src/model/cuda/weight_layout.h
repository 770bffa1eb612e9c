// Internal to model/cuda: where each weight of CudaLlamaModel lives inside its
// one device allocation. Shared by the loaders (GGUF, Hugging Face, random).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace exactly {

inline int64_t qkv_rows(const ModelConfig& c) { return int64_t{c.n_heads + 2 * c.n_kv_heads} * c.head_dim; }
inline int64_t q_width(const ModelConfig& c) { return int64_t{c.n_heads} * c.head_dim; }
// Bytes of one expert's matrix of expert_ffn_dim x dim in bf16: its gate | up
// take two at gate_up + 2 e of them, its down one at down + e.
inline size_t expert_matrix_bytes(const ModelConfig& c) {
  return static_cast<size_t>(c.expert_ffn_dim) * static_cast<size_t>(c.dim) * 2;
}

// Offsets of every tensor inside the one weight allocation, each 256-byte
// aligned (cuBLASLt and the 16-byte vector loads want aligned rows).
struct WeightLayout {
  struct LayerOffsets {
    size_t attn_norm, wqkv, qkv_bias, q_norm, k_norm, wo, ffn_norm, w_gate_up, w_down;  // SIZE_MAX when absent
    // With sandwich norms (Gemma 3): the norms of the attention's and the MLP's outputs.
    size_t post_attn_norm = SIZE_MAX, post_ffn_norm = SIZE_MAX;
    // With experts, in place of w_gate_up and w_down: the router [n_experts,
    // dim] and every expert's gate | up [n_experts, 2 expert_ffn_dim, dim] and
    // down [n_experts, dim, expert_ffn_dim].
    size_t router = SIZE_MAX, experts_gate_up = SIZE_MAX, experts_down = SIZE_MAX;
  };
  size_t token_embd = 0, output = 0, output_norm = 0;
  size_t fc = SIZE_MAX;  // a draft head's input projection [dim, 2 dim]
  std::vector<LayerOffsets> layers;
  size_t total = 0;

  // A model's: its vocabulary tables (one when tied), output norm and layers.
  WeightLayout(const ModelConfig& c, bool tied, bool bias) : WeightLayout(c, tied ? kTied : kOwn, bias) {}
  // A draft head's (model/draft_head_file.h): its input projection in place
  // of the vocabulary tables, which it borrows from its target (SIZE_MAX).
  static WeightLayout draft_head(const ModelConfig& c) { return WeightLayout(c, kBorrowed, false); }

 private:
  enum Tables { kOwn, kTied, kBorrowed };
  WeightLayout(const ModelConfig& c, Tables tables, bool bias) {
    auto take = [&](size_t bytes) {
      const size_t at = total;
      total += (bytes + 255) / 256 * 256;
      return at;
    };
    const size_t dim = static_cast<size_t>(c.dim), ffn = static_cast<size_t>(c.ffn_dim);
    if (tables == kBorrowed) {
      token_embd = output = SIZE_MAX;
      fc = take(dim * 2 * dim * 2);
    } else {
      token_embd = take(static_cast<size_t>(c.vocab_size) * dim * 2);
      output = tables == kTied ? token_embd : take(static_cast<size_t>(c.vocab_size) * dim * 2);
    }
    output_norm = take(dim * 4);
    for (int l = 0; l < c.n_layers; ++l) {
      LayerOffsets o{};
      o.attn_norm = take(dim * 4);
      o.wqkv = take(static_cast<size_t>(qkv_rows(c)) * dim * 2);
      o.qkv_bias = bias ? take(static_cast<size_t>(qkv_rows(c)) * 4) : SIZE_MAX;
      o.q_norm = c.qk_norm ? take(static_cast<size_t>(c.head_dim) * 4) : SIZE_MAX;
      o.k_norm = c.qk_norm ? take(static_cast<size_t>(c.head_dim) * 4) : SIZE_MAX;
      o.wo = take(dim * static_cast<size_t>(q_width(c)) * 2);
      o.ffn_norm = take(dim * 4);
      if (c.sandwich_norms) {
        o.post_attn_norm = take(dim * 4);
        o.post_ffn_norm = take(dim * 4);
      }
      if (c.n_experts > 0) {
        const size_t experts = static_cast<size_t>(c.n_experts);
        o.w_gate_up = o.w_down = SIZE_MAX;
        o.router = take(experts * dim * 2);
        o.experts_gate_up = take(experts * 2 * expert_matrix_bytes(c));
        o.experts_down = take(experts * expert_matrix_bytes(c));
      } else {
        o.w_gate_up = take(2 * ffn * dim * 2);
        o.w_down = take(dim * ffn * 2);
      }
      layers.push_back(o);
    }
  }
};

}  // namespace exactly
