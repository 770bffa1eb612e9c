// The llama-family weights of a Hugging Face safetensors checkpoint, checked
// against the config before anything is allocated on a device: every tensor
// present, of a float type and of the shape the config implies. Host-side
// conversion to the types the GPU model stores (bf16 matrices, f32 vectors).
//
// Hugging Face q/k rows keep the half-split RoPE layout (dims i and
// i + rope_dims/2 rotate together); they are used as stored, with
// RopeLayout::kHalfSplit, never permuted as GGUF converters do.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loader/safetensors.h"
#include "model/config.h"

namespace exactly {

// gpt-oss's experts as its checkpoints store them: each layer's experts in
// one stack per product, gate and up interleaved in one (output 2j is gate j,
// 2j + 1 is up j), either as float stacks of [in, out] per expert (gate_up
// [n_experts, dim, 2 ffn], down [n_experts, ffn, dim]) or in MXFP4 as blocks
// of 32 values along the input ([n_experts, out, in / 32, 16] bytes, element
// 2k in byte k's low nibble and 2k + 1 in its high one) with one E8M0 scale
// per block ([n_experts, out, in / 32]). Biases [n_experts, 2 ffn] and
// [n_experts, dim].
struct HfFusedExperts {
  const SafetensorsTensor* gate_up = nullptr;
  const SafetensorsTensor* gate_up_blocks = nullptr;
  const SafetensorsTensor* gate_up_scales = nullptr;
  const SafetensorsTensor* gate_up_bias = nullptr;
  const SafetensorsTensor* down = nullptr;
  const SafetensorsTensor* down_blocks = nullptr;
  const SafetensorsTensor* down_scales = nullptr;
  const SafetensorsTensor* down_bias = nullptr;
  bool mxfp4() const { return gate_up_blocks != nullptr; }
};

struct HfLayerWeights {
  const SafetensorsTensor* attn_norm;  // [dim]
  const SafetensorsTensor* wq;         // [n_heads head_dim, dim]
  const SafetensorsTensor* wk;         // [n_kv_heads head_dim, dim]
  const SafetensorsTensor* wv;         // [n_kv_heads head_dim, dim]
  const SafetensorsTensor* q_bias;     // [n_heads head_dim], null without attention_bias
  const SafetensorsTensor* k_bias;     // [n_kv_heads head_dim], null without attention_bias
  const SafetensorsTensor* v_bias;     // [n_kv_heads head_dim], null without attention_bias
  const SafetensorsTensor* q_norm;     // [head_dim], with config.qk_norm (Qwen3)
  const SafetensorsTensor* k_norm;     // [head_dim], with config.qk_norm
  const SafetensorsTensor* wo;         // [dim, n_heads head_dim]
  const SafetensorsTensor* o_bias;     // [dim] (gpt-oss)
  const SafetensorsTensor* sinks;      // [n_heads], with config.attention_sinks
  const SafetensorsTensor* ffn_norm;   // [dim] (Gemma 3: pre_feedforward_layernorm)
  // With config.sandwich_norms (Gemma 3): the norms on the attention block's
  // output (post_attention_layernorm) and the MLP's (post_feedforward_layernorm).
  const SafetensorsTensor* post_attn_norm;
  const SafetensorsTensor* post_ffn_norm;
  const SafetensorsTensor* w_gate;     // [ffn_dim, dim]
  const SafetensorsTensor* w_up;       // [ffn_dim, dim]
  const SafetensorsTensor* w_down;     // [dim, ffn_dim]
  // With config.n_experts, in place of the three above: the router
  // [n_experts, dim] and each expert's gate, up [expert_ffn_dim, dim] and
  // down [dim, expert_ffn_dim].
  const SafetensorsTensor* router;
  std::vector<std::array<const SafetensorsTensor*, 3>> experts;
  // gpt-oss: the router's bias [n_experts] and the fused experts in place of `experts`.
  const SafetensorsTensor* router_bias;
  HfFusedExperts fused;
};

// Views into the checkpoint's mapping (which this object owns).
struct HfWeights {
  std::unique_ptr<SafetensorsCheckpoint> checkpoint;
  const SafetensorsTensor* token_embd;   // [vocab, dim]
  const SafetensorsTensor* output;       // [vocab, dim]; token_embd when tied
  const SafetensorsTensor* output_norm;  // [dim]
  std::vector<HfLayerWeights> layers;
  // Row ranges of fused tensors (Phi-3's qkv_proj and gate_up_proj) as
  // tensors of their own, views into the same bytes.
  std::vector<std::unique_ptr<SafetensorsTensor>> views;

  bool tied() const { return output == token_embd; }
  bool qkv_bias() const { return !layers.empty() && layers[0].q_bias != nullptr; }

  // Opens `path` (a checkpoint directory, an index file or a .safetensors
  // file) and checks it against `config`: a FileFormatError naming the tensor
  // and its file for a missing tensor, a dtype other than BF16/F16/F32, a
  // shape other than the config's, or an o_proj bias (but gpt-oss's). A
  // layer's fused self_attn.qkv_proj and mlp.gate_up_proj (Phi-3) stand for
  // its q/k/v and gate/up projections, in that order of rows.
  // lm_head.weight is ignored when config.tied_embeddings.
  static HfWeights open(const std::string& path, const ModelConfig& config);
};

// What a checkpoint's RMSNorm weights are offset by before use: Gemma's store
// w and compute with 1 + w (GGUF converters store 1 + w); the others, 0.
inline float hf_norm_offset(const ModelConfig& c) { return c.architecture == "gemma3" ? 1.0f : 0.0f; }

// The tensor's values rounded to bf16 (nearest even), appended to `out`.
void append_as_bf16(const SafetensorsTensor& t, std::vector<uint16_t>& out);
// The tensor's values as f32 (exact for every accepted dtype), appended to `out`.
void append_as_f32(const SafetensorsTensor& t, std::vector<float>& out);

}  // namespace exactly
