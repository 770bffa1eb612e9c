#include "model/config.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/format.h"
#include "loader/gguf.h"
#include "model/rope_scaling.h"

namespace exactly {

namespace {

int32_t positive_int(const GGUFFile& f, const std::string& key) {
  int64_t v = f.require_int(key);
  if (v <= 0 || v > (int64_t{1} << 30))
    throw FileFormatError(strformat("%s: metadata key '%s' has invalid value %lld", f.path().c_str(),
                                    key.c_str(), static_cast<long long>(v)));
  return static_cast<int32_t>(v);
}

constexpr const char* kOutputTokenIdsKey = "exactly.output_token_ids";

// Bounds that keep a layer's routing tables small whatever the file says.
constexpr int32_t kMaxExperts = 1024, kMaxExpertsUsed = 64;
constexpr int32_t kMaxRopeDims = 1024;  // the RoPE kernels' bound (512 pairs)

// YaRN as llama.cpp writes it: factor and original context required, the
// ramp's turns (32 and 1) and an attention factor multiplying the default
// magnitude optional; the ramp's ends are floored and ceiled, as llama.cpp
// computes them. Keys that would change YaRN in ways not implemented here are
// refused by name.
void read_yarn(const GGUFFile& f, const std::string& a, ModelConfig& c) {
  YarnScaling& y = c.rope_yarn;
  auto number = [&](const std::string& key, double fallback, bool required) {
    const std::string full = a + "rope.scaling." + key;
    if (!f.find(full)) {
      if (required)
        throw FileFormatError(strformat("%s: metadata key '%s' is missing (YaRN RoPE scaling needs it)",
                                        f.path().c_str(), full.c_str()));
      return fallback;
    }
    const double v = f.get_float(full).value_or(-1);  // any numeric type
    if (!(v > 0) || !std::isfinite(v))
      throw FileFormatError(strformat("%s: metadata key '%s' must be a positive number", f.path().c_str(), full.c_str()));
    return v;
  };
  const double factor = number("factor", 0, true);
  y.factor = static_cast<float>(factor);
  y.original_context = static_cast<int32_t>(std::min(number("original_context_length", 0, true), 1e9));
  y.beta_fast = static_cast<float>(number("yarn_beta_fast", 32, false));
  y.beta_slow = static_cast<float>(number("yarn_beta_slow", 1, false));
  y.attention_factor = static_cast<float>(number("attn_factor", 1, false) * yarn_default_attention_factor(factor));
  for (const char* key : {"yarn_log_multiplier"})
    if (f.find(a + "rope.scaling." + key))
      throw FileFormatError(strformat("%s: metadata key '%s' is not supported", f.path().c_str(),
                                      (a + "rope.scaling." + key).c_str()));
  // llama.cpp's converter writes a checkpoint's own attention factor here;
  // how it combines with the default magnitude differs between its versions.
  const std::string attn = a + "rope.scaling.yarn_attn_factor";
  if (f.find(attn) && f.get_float(attn).value_or(0) != 1.0)
    throw FileFormatError(strformat("%s: metadata key '%s' is not supported (only 1)", f.path().c_str(), attn.c_str()));
  const std::string ext = a + "rope.scaling.yarn_ext_factor";
  if (f.find(ext)) {
    const double v = f.get_float(ext).value_or(0);
    if (v != 1.0 && v != -1.0)
      throw FileFormatError(strformat("%s: metadata key '%s' is %g; only 1 (or -1, the default) is supported",
                                      f.path().c_str(), ext.c_str(), v));
  }
}

// RoPE scaling: "linear" divides the positions by rope.scaling.factor;
// Llama 3.1's frequency factors are a tensor, read with the weights. Any
// other kind changes the angles in ways not implemented here: refused, naming
// the key, rather than run with the angles of an unscaled model.
void read_rope_scaling(const GGUFFile& f, const std::string& a, ModelConfig& c) {
  const std::string type_key = a + "rope.scaling.type", factor_key = a + "rope.scaling.factor";
  const std::string type = f.find(type_key) ? f.get_string(type_key).value_or("(not a string)") : "";
  if (type == "linear") {
    const double factor = f.get_float(factor_key).value_or(0.0);
    if (!(factor > 0) || !std::isfinite(factor))
      throw FileFormatError(strformat("%s: metadata key '%s' must be a positive number for linear RoPE scaling",
                                      f.path().c_str(), factor_key.c_str()));
    c.rope_linear_scale = static_cast<float>(factor);
    return;
  }
  if (type == "yarn" && c.architecture != "gemma3") return read_yarn(f, a, c);  // Gemma 3's local layers: no
  if (!type.empty() && type != "none")
    throw FileFormatError(strformat("%s: metadata key '%s' is '%s', which is not supported (%s)", f.path().c_str(),
                                    type_key.c_str(), type.c_str(),
                                    c.architecture == "gemma3" ? "none or linear for gemma3" : "none, linear or yarn"));
  if (type.empty() && f.find(factor_key) && f.get_float(factor_key).value_or(0.0) != 1.0)
    throw FileFormatError(strformat("%s: metadata key '%s' scales RoPE without a rope.scaling.type",
                                    f.path().c_str(), factor_key.c_str()));
}

// Gemma 3 as llama.cpp writes it: norms already hold 1 + w, and what the file
// does not say is fixed by the architecture there: every sixth layer global,
// the others sliding with RoPE base 10,000, and scores scaled by
// 1/sqrt(head_dim) except in the 27B (62 layers), whose query_pre_attn_scalar
// is embedding_length / head_count.
void read_gemma3(const GGUFFile& f, const std::string& a, ModelConfig& c) {
  c.qk_norm = true;
  c.rope_layout = RopeLayout::kHalfSplit;
  c.sandwich_norms = true;
  c.activation = MlpActivation::kGeluTanh;
  c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
  const int32_t window = positive_int(f, a + "attention.sliding_window");
  const int32_t pattern = f.find(a + "attention.sliding_window_pattern")
                              ? positive_int(f, a + "attention.sliding_window_pattern")
                              : 6;
  for (int32_t l = 0; l < c.n_layers; ++l) c.layer_windows.push_back((l + 1) % pattern != 0 ? window : 0);
  c.rope_local_freq_base = static_cast<float>(f.get_float(a + "rope.freq_base_swa").value_or(10000.0));
  if (!(c.rope_local_freq_base > 0))
    throw FileFormatError(strformat("%s: metadata key '%srope.freq_base_swa' must be positive", f.path().c_str(),
                                    a.c_str()));
  if (c.n_layers == 62) c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.dim / c.n_heads));
  const double cap = f.get_float(a + "final_logit_softcapping").value_or(0.0);
  if (!(cap >= 0) || !std::isfinite(cap))
    throw FileFormatError(strformat("%s: metadata key '%sfinal_logit_softcapping' must be >= 0", f.path().c_str(),
                                    a.c_str()));
  c.final_logit_softcap = static_cast<float>(cap);
  if (f.get_float(a + "attn_logit_softcapping").value_or(0.0) != 0.0)
    throw FileFormatError(strformat("%s: metadata key '%sattn_logit_softcapping' caps attention scores, which "
                                    "is not supported",
                                    f.path().c_str(), a.c_str()));
}

// gpt-oss as llama.cpp writes it: biases on every attention and expert
// product and on the router, a sink per head, the clamped SwiGLU, RoPE pairs
// half a head apart, and a sliding window on the even layers (the others
// global).
void read_gpt_oss(const GGUFFile& f, const std::string& a, ModelConfig& c) {
  c.attention_bias = true;
  c.attention_sinks = true;
  c.expert_biases = true;
  c.activation = MlpActivation::kClampedSwiglu;
  c.rope_layout = RopeLayout::kHalfSplit;
  const int32_t window = positive_int(f, a + "attention.sliding_window");
  for (int32_t l = 0; l < c.n_layers; ++l) c.layer_windows.push_back(l % 2 == 0 ? window : 0);
}

// A llama file with attention.sliding_window (Mistral's window, where a
// converter writes it): every layer slides. A pattern of sliding and global
// layers is refused, naming the key, rather than guessed.
void read_llama_window(const GGUFFile& f, const std::string& a, ModelConfig& c) {
  if (!f.find(a + "attention.sliding_window")) return;
  const std::string pattern = a + "attention.sliding_window_pattern";
  if (f.find(pattern))
    throw FileFormatError(strformat("%s: metadata key '%s' is not supported for %s (every layer slides)",
                                    f.path().c_str(), pattern.c_str(), c.architecture.c_str()));
  const int32_t window = positive_int(f, a + "attention.sliding_window");
  c.layer_windows.assign(static_cast<size_t>(c.n_layers), window);
}

// <arch>.expert_count and expert_used_count; the expert width from
// expert_feed_forward_length (Qwen3-MoE, gpt-oss) or feed_forward_length
// (Mixtral).
void read_experts(const GGUFFile& f, const std::string& a, ModelConfig& c) {
  const bool moe_arch = c.architecture == "qwen3moe" || c.architecture == "gpt-oss";
  if (!moe_arch && (!f.find(a + "expert_count") || f.require_int(a + "expert_count") == 0)) return;
  c.n_experts = positive_int(f, a + "expert_count");
  c.n_experts_used = positive_int(f, a + "expert_used_count");
  if (c.n_experts > kMaxExperts || c.n_experts_used > std::min(c.n_experts, kMaxExpertsUsed))
    throw FileFormatError(strformat("%s: %d experts with %d used per token (at most %d, and %d used)",
                                    f.path().c_str(), c.n_experts, c.n_experts_used, kMaxExperts, kMaxExpertsUsed));
  c.expert_ffn_dim = f.find(a + "expert_feed_forward_length") ? positive_int(f, a + "expert_feed_forward_length")
                                                              : positive_int(f, a + "feed_forward_length");
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GGUFFile& f) {
  ModelConfig c;
  c.architecture = f.require_string("general.architecture");
  if (c.architecture != "llama" && c.architecture != "qwen3" && c.architecture != "qwen3moe" &&
      c.architecture != "gemma3" && c.architecture != "gpt-oss" && c.architecture != "smollm3" &&
      c.architecture != "phi3")
    throw FileFormatError(strformat("%s: architecture '%s' is not supported (supported: llama, qwen3, qwen3moe, "
                                    "gemma3, gpt-oss, smollm3, phi3)",
                                    f.path().c_str(), c.architecture.c_str()));
  // Qwen3: the llama body with a per-head RMSNorm of q and k, and RoPE's
  // pairs half a head apart (its converter keeps the checkpoint's layout).
  if (c.architecture == "qwen3" || c.architecture == "qwen3moe") {
    c.qk_norm = true;
    c.rope_layout = RopeLayout::kHalfSplit;
  }
  // Phi-3: the llama body with fused q/k/v and gate/up tensors, RoPE's pairs
  // half the rotated dims apart; its 128k files' longrope is refused.
  if (c.architecture == "phi3") {
    c.rope_layout = RopeLayout::kHalfSplit;
    for (const char* name : {"rope_factors_long.weight", "rope_factors_short.weight"})
      if (f.find_tensor(name))
        throw FileFormatError(strformat("%s: tensor '%s' is Phi-3's longrope scaling, which is not supported",
                                        f.path().c_str(), name));
  }
  c.name = f.get_string("general.name").value_or("");
  const std::string a = c.architecture + ".";
  c.n_layers = positive_int(f, a + "block_count");
  c.dim = positive_int(f, a + "embedding_length");
  read_experts(f, a, c);
  c.ffn_dim = c.n_experts > 0 && !f.find(a + "feed_forward_length") ? c.expert_ffn_dim
                                                                    : positive_int(f, a + "feed_forward_length");
  c.n_heads = positive_int(f, a + "attention.head_count");
  c.n_kv_heads = f.find(a + "attention.head_count_kv") ? positive_int(f, a + "attention.head_count_kv")
                                                       : c.n_heads;
  c.context_length = positive_int(f, a + "context_length");
  if (c.n_heads % c.n_kv_heads != 0)
    throw FileFormatError(strformat("%s: %d heads are not a multiple of %d KV heads", f.path().c_str(), c.n_heads,
                                    c.n_kv_heads));
  // A head may be narrower or wider than embedding_length / head_count
  // where the file says so (Qwen3-0.6B: 16 heads of 128 over 1,024).
  if (f.find(a + "attention.key_length")) {
    c.head_dim = positive_int(f, a + "attention.key_length");
    if (f.find(a + "attention.value_length") && positive_int(f, a + "attention.value_length") != c.head_dim)
      throw FileFormatError(strformat("%s: attention.value_length differs from attention.key_length (%d)",
                                      f.path().c_str(), c.head_dim));
  } else {
    if (c.dim % c.n_heads != 0)
      throw FileFormatError(strformat("%s: %d heads do not divide embedding length %d", f.path().c_str(),
                                      c.n_heads, c.dim));
    c.head_dim = c.dim / c.n_heads;
  }
  c.rope_dims = f.find(a + "rope.dimension_count") ? positive_int(f, a + "rope.dimension_count")
                                                   : c.head_dim;
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0 || c.rope_dims > kMaxRopeDims)
    throw FileFormatError(strformat("%s: rope.dimension_count %d is invalid for head dim %d (even, at most %d)",
                                    f.path().c_str(), c.rope_dims, c.head_dim, kMaxRopeDims));
  c.rope_freq_base = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
  c.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(c.rope_freq_base > 0) || !(c.rms_eps > 0))
    throw FileFormatError(strformat("%s: rope.freq_base and layer_norm_rms_epsilon must be positive",
                                    f.path().c_str()));
  read_rope_scaling(f, a, c);
  if (c.architecture == "gemma3") read_gemma3(f, a, c);
  if (c.architecture == "gpt-oss") read_gpt_oss(f, a, c);
  if (c.architecture == "llama" || c.architecture == "phi3") read_llama_window(f, a, c);
  // SmolLM3: the llama body whose every fourth layer applies no RoPE (a step
  // llama.cpp fixes for the architecture; the file does not state it).
  if (c.architecture == "smollm3")
    for (int32_t l = 0; l < c.n_layers; ++l) c.layer_skips_rope.push_back((l + 1) % 4 == 0);
  c.rope_freq_factors = f.find_tensor("rope_freqs.weight") != nullptr;
  const GGUFTensorInfo& embd = f.require_tensor("token_embd.weight");
  c.vocab_size = embd.shape.size() == 2 ? static_cast<int32_t>(embd.shape[1]) : 0;
  if (f.find(kOutputTokenIdsKey)) {
    const auto ids = f.get_int_array(kOutputTokenIdsKey);
    if (!ids || ids->empty())
      throw FileFormatError(strformat("%s: metadata key '%s' should be a non-empty array of token ids",
                                      f.path().c_str(), kOutputTokenIdsKey));
    for (size_t i = 0; i < ids->size(); ++i) {
      const int64_t id = (*ids)[i];
      if (id < 0 || id >= c.vocab_size || (i > 0 && id <= (*ids)[i - 1]))
        throw FileFormatError(strformat("%s: %s[%zu] = %lld: the ids must increase strictly and lie in [0, %d)",
                                        f.path().c_str(), kOutputTokenIdsKey, i, static_cast<long long>(id),
                                        c.vocab_size));
      c.output_token_ids.push_back(static_cast<int32_t>(id));
    }
    if (!f.find_tensor("output.weight"))
      throw FileFormatError(strformat("%s: '%s' is set, so the file needs its own output.weight",
                                      f.path().c_str(), kOutputTokenIdsKey));
  }
  return c;
}

void cap_context_at_windows(ModelConfig& c) {
  for (int32_t w : c.layer_windows)
    if (w > 0) c.context_length = std::min(c.context_length, w);
}

}  // namespace exactly
