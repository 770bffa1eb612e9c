// Hyperparameters of a llama-family model, read from GGUF metadata or from a
// Hugging Face config.json (model/hf_config.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace exactly {

class GGUFFile;

// How RoPE pairs the dimensions of a head. GGUF converters permute the q/k
// weights of llama models so that dims (2i, 2i+1) rotate together; Hugging
// Face checkpoints keep the original layout, which rotates (i, i + rope_dims/2).
enum class RopeLayout { kAdjacentPairs, kHalfSplit };

// The MLP's gate: SwiGLU (silu), GeGLU with GELU's tanh form (Gemma), or
// gpt-oss's clamped SwiGLU ((clamp(up) + 1) * g * sigmoid(alpha * g) with
// g = min(gate, limit); ModelConfig::swiglu_alpha and swiglu_limit).
enum class MlpActivation { kSilu, kGeluTanh, kClampedSwiglu };

// YaRN: pair i's frequency moves from the original one (extrapolation) to
// the original divided by `factor` (interpolation) along a linear ramp over
// the pairs whose wavelength fits between beta_fast and beta_slow turns in
// original_context positions (the ramp's ends floored and ceiled when
// `truncate`); every cosine and sine is multiplied by attention_factor.
struct YarnScaling {
  float factor = 0.0f;
  int32_t original_context = 0;
  float beta_fast = 32.0f, beta_slow = 1.0f;
  float attention_factor = 1.0f;
  bool truncate = true;
};

// Llama 3.1's "llama3" scaling as config.json states it (GGUF files carry
// its result, rope_freqs.weight): pairs whose wavelength exceeds
// original_context / low_freq_factor divided by `factor`, those under
// original_context / high_freq_factor kept, a smooth blend between.
struct Llama3Scaling {
  float factor = 0.0f;  // 0: none
  float low_freq_factor = 1.0f, high_freq_factor = 4.0f;
  int32_t original_context = 8192;
};

struct ModelConfig {
  std::string architecture;  // general.architecture: llama, qwen3, qwen3moe, gemma3 or gpt-oss
  std::string name;          // general.name
  int32_t n_layers = 0;
  int32_t dim = 0;           // embedding length
  int32_t ffn_dim = 0;       // feed-forward hidden size
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t rope_dims = 0;     // leading dims of each head that are rotated
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  int32_t context_length = 0;
  int32_t vocab_size = 0;
  RopeLayout rope_layout = RopeLayout::kAdjacentPairs;
  // The q/k/v projections carry biases (Qwen2). Llama's attention_bias also
  // gives o_proj one (as gpt-oss has); the checkpoint's tensors say which.
  bool attention_bias = false;
  // gpt-oss: each layer has one learned logit per query head ([n_heads]) that
  // joins every row's softmax denominator (kernels::attention's sinks).
  bool attention_sinks = false;
  // Each head of q and k goes through an RMSNorm of its own (weights
  // [head_dim], one per layer for q and one for k) before RoPE (Qwen3).
  bool qk_norm = false;
  // The file's rope_freqs.weight ([rope_dims/2]) divides each pair's
  // frequency (Llama 3.1's and 3.2's "llama3" RoPE scaling).
  bool rope_freq_factors = false;
  // Mixture of experts (Mixtral: llama with llama.expert_count; Qwen3-MoE):
  // n_experts SwiGLU experts of width expert_ffn_dim per layer in place of
  // the MLP, each token routed to n_experts_used of them. 0: a dense MLP.
  int32_t n_experts = 0;
  int32_t n_experts_used = 0;
  int32_t expert_ffn_dim = 0;
  // The router's logits and every expert's gate, up and down products carry
  // biases (gpt-oss).
  bool expert_biases = false;
  // RoPE scaling "linear": positions divided by this factor (frequencies
  // divided, as Hugging Face does) in the global layers; 1: none.
  float rope_linear_scale = 1.0f;
  // RoPE scaling "yarn" (factor 0: none); model/rope_scaling.h computes it.
  YarnScaling rope_yarn;
  // RoPE scaling "llama3" from config.json (factor 0: none); the same.
  Llama3Scaling rope_llama3;
  // Gemma 3: the stream starts as the embedding row times embedding_scale;
  // each sub-layer's output passes an RMSNorm of its own before the residual
  // add (sandwich_norms: post_attention_norm, post_ffw_norm); the gate is
  // GELU; attention scores are scaled by attention_scale, not
  // 1/sqrt(head_dim); sliding-window layers (layer_windows[l] > 0: a query
  // sees that many keys, itself included) use RoPE base rope_local_freq_base
  // unscaled; the logits pass cap * tanh(logit / cap) with a final cap.
  float embedding_scale = 0.0f;     // 0: none
  bool sandwich_norms = false;
  MlpActivation activation = MlpActivation::kSilu;
  float swiglu_alpha = 1.702f, swiglu_limit = 7.0f;  // kClampedSwiglu's constants (gpt-oss's)
  float attention_scale = 0.0f;     // 0: 1 / sqrt(head_dim)
  std::vector<int32_t> layer_windows;  // [n_layers]; empty: every layer global
  // SmolLM3's NoPE layers: true at l where layer l rotates neither q nor k.
  std::vector<bool> layer_skips_rope;  // [n_layers]; empty: every layer rotates
  bool skips_rope(int layer) const {
    return !layer_skips_rope.empty() && layer_skips_rope[static_cast<size_t>(layer)];
  }
  float rope_local_freq_base = 0.0f;   // 0: rope_freq_base
  float final_logit_softcap = 0.0f;    // 0: none
  int32_t window_of(int layer) const {
    return layer_windows.empty() ? 0 : layer_windows[static_cast<size_t>(layer)];
  }
  // How far back any layer reads keys: a query at position p reads none
  // before p - kv_window() + 1. The largest window when every layer slides;
  // 0 when a layer is global (it reads the whole context).
  int32_t kv_window() const {
    if (layer_windows.empty() || std::find(layer_windows.begin(), layer_windows.end(), 0) != layer_windows.end())
      return 0;
    return *std::max_element(layer_windows.begin(), layer_windows.end());
  }
  // The output projection is the token embedding (config.json's
  // tie_word_embeddings). GGUF files leave this false: a missing output.weight
  // says it there.
  bool tied_embeddings = false;
  std::string dtype;  // config.json torch_dtype: "bfloat16", "float16" or "float32"; empty for GGUF
  // GGUF key exactly.output_token_ids: the token of each row of output.weight,
  // strictly increasing. Empty: the head has a row for every token. A draft
  // model's head may cover only the tokens it proposes (most of its cost is
  // the head): the others get logit -inf, so probability 0, which speculative
  // decoding's rejection sampling takes like any draft distribution.
  std::vector<int32_t> output_token_ids;

  // Reads "<arch>.*" keys; throws FileFormatError naming a missing/invalid key.
  static ModelConfig from_gguf(const GGUFFile& file);
};

// For kernels that compute no sliding window (the GPU's): the context capped
// at the smallest window, below which every window is full attention. Exact,
// at the price of the context. The windows stay (they say which layers rotate
// at rope_local_freq_base), and no key ever falls out of one.
void cap_context_at_windows(ModelConfig& c);

}  // namespace exactly
