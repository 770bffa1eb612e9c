#include "model/hf_config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <optional>

#include "core/error.h"
#include "core/format.h"
#include "core/half.h"
#include "loader/json_file.h"

namespace exactly {
namespace {

struct Architecture {
  std::string_view hf_name;   // config.json "architectures"
  std::string_view name;      // ModelConfig::architecture, as GGUF names it
  bool qkv_bias;              // biases on q/k/v whatever the config says (Qwen2's are hard-wired)
  bool reads_attention_bias;  // config.json "attention_bias" applies
};

constexpr std::array<Architecture, 10> kArchitectures = {{
    {"LlamaForCausalLM", "llama", false, true},
    {"Phi3ForCausalLM", "llama", false, false},
    {"SmolLM3ForCausalLM", "llama", false, true},
    {"MistralForCausalLM", "llama", false, false},
    {"MixtralForCausalLM", "llama", false, false},
    {"Qwen2ForCausalLM", "qwen2", true, false},
    {"Qwen3ForCausalLM", "qwen3", false, true},
    {"Qwen3MoeForCausalLM", "qwen3moe", false, true},
    {"Gemma3ForCausalLM", "gemma3", false, true},
    {"GptOssForCausalLM", "gpt-oss", false, true},
}};

int32_t positive_int(const JsonObject& cfg, std::string_view key, std::optional<int64_t> fallback = std::nullopt) {
  const std::optional<int64_t> v = cfg.find(key) ? cfg.get_int(key) : fallback;
  if (!v) cfg.fail(key, "is missing");
  if (*v <= 0 || *v > (int64_t{1} << 30))
    cfg.fail(key, strformat("has invalid value %lld", static_cast<long long>(*v)));
  return static_cast<int32_t>(*v);
}

// Bounds that keep a layer's routing tables small whatever the file says.
constexpr int32_t kMaxExperts = 1024, kMaxExpertsUsed = 64;

// Mixtral's and Qwen3-MoE's experts; the options of Qwen3-MoE's that would
// compute another model are refused by name.
void read_experts(const JsonObject& cfg, std::string_view hf_name, ModelConfig& c) {
  const bool mixtral = hf_name == "MixtralForCausalLM";
  // Qwen3-MoE's count is num_experts, or num_local_experts as transformers 5 writes it.
  const bool local_name = mixtral || (!cfg.find("num_experts") && cfg.find("num_local_experts"));
  c.n_experts = positive_int(cfg, local_name ? "num_local_experts" : "num_experts");
  c.n_experts_used = positive_int(cfg, "num_experts_per_tok");
  if (c.n_experts > kMaxExperts || c.n_experts_used > std::min(c.n_experts, kMaxExpertsUsed))
    cfg.fail("num_experts_per_tok", strformat("%d of %d experts (at most %d, and %d used)", c.n_experts_used,
                                              c.n_experts, kMaxExperts, kMaxExpertsUsed));
  c.expert_ffn_dim = mixtral ? c.ffn_dim : positive_int(cfg, "moe_intermediate_size");
  if (mixtral) return;
  if (!cfg.get_bool("norm_topk_prob").value_or(false))
    cfg.fail("norm_topk_prob", "is not true; only normalised top-k weights are supported");
  if (cfg.find("decoder_sparse_step") && cfg.get_int("decoder_sparse_step").value_or(1) != 1)
    cfg.fail("decoder_sparse_step", "is not 1; dense layers among the sparse ones are not supported");
  if (const nlohmann::json* only = cfg.find("mlp_only_layers"); only != nullptr && !only->is_null() &&
                                                                 !(only->is_array() && only->empty()))
    cfg.fail("mlp_only_layers", "is not empty; dense layers among the sparse ones are not supported");
}

const Architecture& architecture(const JsonObject& cfg) {
  const nlohmann::json& list = cfg.require("architectures");
  if (!list.is_array() || list.size() != 1 || !list[0].is_string()) {
    cfg.fail("architectures", strformat("must be a list of one string, not %s", list.dump().c_str()));
  }
  const std::string name = list[0].get<std::string>();
  for (const Architecture& a : kArchitectures) {
    if (a.hf_name == name) return a;
  }
  cfg.fail("architectures",
           strformat("names '%s', which is not supported (supported: LlamaForCausalLM, MistralForCausalLM, "
                     "MixtralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, Gemma3ForCausalLM, "
                     "GptOssForCausalLM, SmolLM3ForCausalLM, Phi3ForCausalLM; the text models of "
                     "Gemma3ForConditionalGeneration and Mistral3ForConditionalGeneration)",
                     name.c_str()));
}

// Settings under which the checkpoint computes something we do not: refusing
// them is better than generating plausible but wrong text.
void reject_unsupported(const JsonObject& cfg, const Architecture& arch) {
  // Gemma names its gate hidden_activation; the others hidden_act.
  const bool gemma = arch.name == "gemma3";
  const char* act_key = gemma && cfg.find("hidden_activation") ? "hidden_activation" : "hidden_act";
  const char* act_wanted = gemma ? "gelu_pytorch_tanh" : "silu";
  if (const auto act = cfg.get_string(act_key); act && *act != act_wanted) {
    cfg.fail(act_key, strformat("is '%s'; only %s is supported", act->c_str(), act_wanted));
  }
  if (cfg.get_bool("use_bidirectional_attention").value_or(false))
    cfg.fail("use_bidirectional_attention", "is true; only causal attention is supported");
  if (cfg.find("attn_logit_softcapping"))
    cfg.fail("attn_logit_softcapping", "is set; capping attention scores is not supported");
  if (cfg.get_bool("mlp_bias").value_or(false)) cfg.fail("mlp_bias", "is true; MLP biases are not supported");
  // gpt-oss's released checkpoints hold the experts in MXFP4 (model/hf_weights.h reads them).
  if (const nlohmann::json* q = cfg.find("quantization_config")) {
    const bool mxfp4 = q->is_object() && q->value("quant_method", "") == "mxfp4";
    if (!(mxfp4 && arch.name == "gpt-oss"))
      cfg.fail("quantization_config", "is set; quantized checkpoints are not supported (but gpt-oss's MXFP4 experts)");
  }
}

struct RopeScale {
  float linear = 1.0f;
  YarnScaling yarn;
  Llama3Scaling llama3;
};

double positive_number(const JsonObject& o, std::string_view key, std::optional<double> fallback) {
  const double v = fallback && !o.find(key) ? *fallback : o.require_number(key);
  if (!(v > 0) || !std::isfinite(v)) o.fail(key, "must be a positive number");
  return v;
}

// YaRN as transformers reads it: the ramp's turns default to 32 and 1, the
// original context to max_position_embeddings, truncation (the ramp's ends
// floored and ceiled) to on; the attention factor is given, or the ratio of
// mscale and mscale_all_dim's magnitudes, or 0.1 ln(factor) + 1. The factor
// is used as given (as vLLM and llama.cpp do) even where the original
// context and max_position_embeddings imply another ratio.
YarnScaling read_hf_yarn(const JsonObject& s, int32_t max_positions) {
  YarnScaling y;
  const double factor = positive_number(s, "factor", std::nullopt);
  y.factor = static_cast<float>(factor);
  y.original_context = static_cast<int32_t>(
      std::min(positive_number(s, "original_max_position_embeddings", max_positions), 1e9));
  // transformers reads `beta_fast or 32`: null and 0 take the defaults too.
  auto turns = [&](std::string_view key, double fallback) {
    const nlohmann::json* v = s.find(key);
    if (v == nullptr || v->is_null() || (v->is_number() && v->get<double>() == 0)) return fallback;
    return positive_number(s, key, std::nullopt);
  };
  y.beta_fast = static_cast<float>(turns("beta_fast", 32.0));
  y.beta_slow = static_cast<float>(turns("beta_slow", 1.0));
  y.truncate = s.get_bool("truncate").value_or(true);
  auto magnitude = [&](double m) { return factor > 1 ? 0.1 * m * std::log(factor) + 1.0 : 1.0; };
  if (s.find("attention_factor") && !s.find("attention_factor")->is_null()) {
    y.attention_factor = static_cast<float>(positive_number(s, "attention_factor", std::nullopt));
  } else {
    const double m = s.get_number("mscale").value_or(0), all = s.get_number("mscale_all_dim").value_or(0);
    y.attention_factor = static_cast<float>(m != 0 && all != 0 ? magnitude(m) / magnitude(all) : magnitude(1.0));
  }
  return y;
}

// Llama 3.1's scaling: transformers reads all four keys, and so do we; the
// blend between the two wavelengths needs low_freq_factor < high_freq_factor.
Llama3Scaling read_hf_llama3(const JsonObject& s) {
  Llama3Scaling l;
  l.factor = static_cast<float>(positive_number(s, "factor", std::nullopt));
  l.low_freq_factor = static_cast<float>(positive_number(s, "low_freq_factor", std::nullopt));
  l.high_freq_factor = static_cast<float>(positive_number(s, "high_freq_factor", std::nullopt));
  if (!(l.low_freq_factor < l.high_freq_factor))
    s.fail("high_freq_factor", strformat("is %g; it must exceed low_freq_factor (%g)",
                                         static_cast<double>(l.high_freq_factor),
                                         static_cast<double>(l.low_freq_factor)));
  l.original_context = static_cast<int32_t>(
      std::min(positive_number(s, "original_max_position_embeddings", std::nullopt), 1e9));
  return l;
}

// One RoPE scaling object, parent[key]: "default", "linear" (positions
// divided by its factor), "yarn" or "llama3". Other kinds are refused by name.
RopeScale rope_scale(const JsonObject& parent, std::string_view key, bool scaling_allowed, int32_t max_positions) {
  const JsonObject s = parent.object(key);
  const auto type = s.find("rope_type") ? s.get_string("rope_type") : s.get_string("type");
  RopeScale r;
  if (type == "default") return r;
  if (type == "linear" && scaling_allowed) {
    r.linear = static_cast<float>(positive_number(s, "factor", std::nullopt));
    return r;
  }
  if (type == "yarn" && scaling_allowed) {
    r.yarn = read_hf_yarn(s, max_positions);
    return r;
  }
  if (type == "llama3" && scaling_allowed) {
    r.llama3 = read_hf_llama3(s);
    return r;
  }
  parent.fail(key, strformat("has type '%s', which is not supported (null, \"default\"%s)",
                             type ? type->c_str() : "(none)",
                             scaling_allowed ? ", \"linear\", \"yarn\" or \"llama3\"" : ""));
}

// transformers 4.x writes rope_scaling (and rope_theta beside it), 5.x
// rope_parameters with rope_theta inside (a top-level rope_theta wins where
// both are written); for models with sliding layers, 5.x nests one object
// per layer type (full_attention, sliding_attention).
struct RopeSettings {
  float theta = 10000.0f, local_theta = 0.0f;
  RopeScale scale;
};

float positive_theta(const JsonObject& o, std::string_view key, double fallback) {
  const double theta = o.get_number(key).value_or(fallback);
  if (!(theta > 0) || !std::isfinite(theta)) o.fail(key, "must be positive");
  return static_cast<float>(theta);
}

RopeSettings rope_settings(const JsonObject& cfg, bool gemma) {
  RopeSettings r;
  const auto max_positions = static_cast<int32_t>(std::clamp(cfg.get_number("max_position_embeddings").value_or(0),
                                                             0.0, 1e9));
  const bool top_theta = cfg.find("rope_theta") != nullptr;
  r.theta = positive_theta(cfg, "rope_theta", gemma ? 1000000.0 : 10000.0);
  if (gemma) r.local_theta = positive_theta(cfg, "rope_local_base_freq", 10000.0);
  if (cfg.find("rope_scaling")) r.scale = rope_scale(cfg, "rope_scaling", true, max_positions);
  if (!cfg.find("rope_parameters")) return r;
  const JsonObject p = cfg.object("rope_parameters");
  const bool per_type = p.find("full_attention") || p.find("sliding_attention");
  const JsonObject full = per_type ? p.object("full_attention") : p;
  if (!top_theta) r.theta = positive_theta(full, "rope_theta", r.theta);
  r.scale = per_type ? rope_scale(p, "full_attention", true, max_positions)
                     : rope_scale(cfg, "rope_parameters", true, max_positions);
  if (per_type && p.find("sliding_attention")) {
    r.local_theta = positive_theta(p.object("sliding_attention"), "rope_theta", r.local_theta);
    rope_scale(p, "sliding_attention", false, max_positions);
  }
  return r;
}

// Which layers slide: layer_types ("sliding_attention" / "full_attention"),
// else the fallback rule; the window from sliding_window.
void read_layer_windows(const JsonObject& cfg, ModelConfig& c, const std::function<bool(int32_t)>& slides) {
  const int32_t window = positive_int(cfg, "sliding_window");
  if (const nlohmann::json* types = cfg.find("layer_types")) {
    if (!types->is_array() || types->size() != static_cast<size_t>(c.n_layers))
      cfg.fail("layer_types", strformat("must list one type per layer (%d)", c.n_layers));
    for (const auto& t : *types) {
      const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
      if (type != "sliding_attention" && type != "full_attention")
        cfg.fail("layer_types", strformat("has '%s' (sliding_attention or full_attention)", type.c_str()));
      c.layer_windows.push_back(type == "sliding_attention" ? window : 0);
    }
    return;
  }
  for (int32_t l = 0; l < c.n_layers; ++l) c.layer_windows.push_back(slides(l) ? window : 0);
}

// The leading dims of each head that RoPE rotates: head_dim, or for Phi-3
// int(head_dim x partial_rotary_factor) (a top-level key, or inside
// rope_parameters from transformers 5 on), the pairs half that apart.
int32_t rotated_dims(const JsonObject& cfg, const Architecture& arch, int32_t head_dim) {
  const JsonObject* where = &cfg;
  std::optional<JsonObject> params;
  if (!cfg.find("partial_rotary_factor") && cfg.find("rope_parameters") && cfg.find("rope_parameters")->is_object()) {
    params.emplace(cfg.object("rope_parameters"));
    where = &*params;
  }
  if (!where->find("partial_rotary_factor")) return head_dim;
  const double f = where->require_number("partial_rotary_factor");
  if (f == 1.0) return head_dim;
  if (arch.hf_name != "Phi3ForCausalLM")
    where->fail("partial_rotary_factor", strformat("is %g; only Phi-3's attention rotates part of a head here", f));
  const auto dims = static_cast<int32_t>(head_dim * f);
  if (!(f > 0 && f < 1) || dims < 2 || dims % 2 != 0)
    where->fail("partial_rotary_factor", strformat("is %g: head_dim %d times it must be an even number of dims", f,
                                                   head_dim));
  return dims;
}

// SmolLM3's NoPE layers: no_rope_layers (1 where a layer uses RoPE, at least
// one entry per layer), else every no_rope_layer_interval-th layer (default
// 4) skips it, as transformers reads them.
void read_nope_layers(const JsonObject& cfg, ModelConfig& c) {
  if (const nlohmann::json* list = cfg.find("no_rope_layers")) {
    if (!list->is_array() || list->size() < static_cast<size_t>(c.n_layers))
      cfg.fail("no_rope_layers", strformat("must list 0 or 1 for each of the %d layers", c.n_layers));
    for (int32_t l = 0; l < c.n_layers; ++l) {
      const nlohmann::json& e = (*list)[static_cast<size_t>(l)];
      if (!e.is_number_integer() || (e.get<int64_t>() != 0 && e.get<int64_t>() != 1))
        cfg.fail("no_rope_layers", strformat("has %s at %d (0: no RoPE, 1: RoPE)", e.dump().c_str(), l));
      c.layer_skips_rope.push_back(e.get<int64_t>() == 0);
    }
    return;
  }
  const int32_t interval = positive_int(cfg, "no_rope_layer_interval", 4);
  for (int32_t l = 0; l < c.n_layers; ++l) c.layer_skips_rope.push_back((l + 1) % interval == 0);
}

// The sliding windows of the families that are llama bodies: Mistral's and
// Mixtral's on every layer, Qwen's (under use_sliding_window) on the layers
// from max_window_layers on, as transformers reads them; layer_types, where
// given, names the sliding layers instead. Llama's transformers model ignores
// a sliding_window key: there the context is capped at the window, below
// which a sliding window is full attention, so either reading is exact.
void read_sliding_windows(const JsonObject& cfg, const Architecture& arch, ModelConfig& c) {
  if (arch.hf_name == "SmolLM3ForCausalLM") {  // the NoPE layers slide, under use_sliding_window
    if (cfg.get_bool("use_sliding_window").value_or(false) && cfg.find("sliding_window"))
      read_layer_windows(cfg, c, [&c](int32_t l) { return c.skips_rope(l); });
    return;
  }
  const bool qwen = arch.hf_name.starts_with("Qwen");
  if (qwen && cfg.get_bool("use_sliding_window").value_or(false)) {
    const int64_t full_layers = cfg.get_int("max_window_layers").value_or(28);  // transformers' default
    if (full_layers < 0) cfg.fail("max_window_layers", "is negative");
    return read_layer_windows(cfg, c, [full_layers](int32_t l) { return l >= full_layers; });
  }
  if (qwen || cfg.find("sliding_window") == nullptr) return;
  if (arch.hf_name == "MistralForCausalLM" || arch.hf_name == "MixtralForCausalLM" || arch.hf_name == "Phi3ForCausalLM")
    return read_layer_windows(cfg, c, [](int32_t) { return true; });
  if (arch.hf_name == "LlamaForCausalLM")
    c.context_length = std::min(c.context_length, positive_int(cfg, "sliding_window"));
}

// Gemma 3's layers: sliding or global from layer_types, or else every
// sliding_window_pattern-th layer global; the embedding scaled by
// sqrt(hidden_size) rounded to the checkpoint's dtype, as transformers does;
// scores scaled by query_pre_attn_scalar^-1/2; the norms' 1 + w is applied
// where the weights are read (model/llama.cc).
void read_gemma3(const JsonObject& cfg, const std::string& dtype, ModelConfig& c) {
  c.qk_norm = true;
  c.sandwich_norms = true;
  c.activation = MlpActivation::kGeluTanh;
  const float root = std::sqrt(static_cast<float>(c.dim));
  c.embedding_scale = dtype == "bfloat16" ? bf16_to_float(float_to_bf16(root))
                      : dtype == "float16" ? half_to_float(float_to_half(root))
                                           : root;
  const double scalar = cfg.get_number("query_pre_attn_scalar").value_or(256.0);
  if (!(scalar > 0) || !std::isfinite(scalar)) cfg.fail("query_pre_attn_scalar", "must be positive");
  c.attention_scale = static_cast<float>(1.0 / std::sqrt(scalar));
  const int32_t pattern = cfg.find("layer_types") ? 1 : positive_int(cfg, "sliding_window_pattern", 6);
  read_layer_windows(cfg, c, [pattern](int32_t l) { return (l + 1) % pattern != 0; });
  const double cap = cfg.get_number("final_logit_softcapping").value_or(0.0);
  if (!(cap >= 0) || !std::isfinite(cap)) cfg.fail("final_logit_softcapping", "must be positive or null");
  c.final_logit_softcap = static_cast<float>(cap);
}

// gpt-oss: biases on every attention product, the router and the experts
// (num_local_experts of width intermediate_size, gate and up interleaved in
// one product); a sink logit per head; the clamped SwiGLU at swiglu_limit;
// sliding windows on the layers layer_types names (the even ones by default).
void read_gpt_oss(const JsonObject& cfg, ModelConfig& c) {
  c.attention_sinks = true;
  c.expert_biases = true;
  c.activation = MlpActivation::kClampedSwiglu;
  const double limit = cfg.get_number("swiglu_limit").value_or(7.0);
  if (!(limit > 0) || !std::isfinite(limit)) cfg.fail("swiglu_limit", "must be a positive number");
  c.swiglu_limit = static_cast<float>(limit);
  c.n_experts = positive_int(cfg, "num_local_experts");
  c.n_experts_used = positive_int(cfg, "num_experts_per_tok");
  if (c.n_experts > kMaxExperts || c.n_experts_used > std::min(c.n_experts, kMaxExpertsUsed))
    cfg.fail("num_experts_per_tok", strformat("%d of %d experts (at most %d, and %d used)", c.n_experts_used,
                                              c.n_experts, kMaxExperts, kMaxExpertsUsed));
  c.expert_ffn_dim = c.ffn_dim;
  read_layer_windows(cfg, c, [](int32_t l) { return l % 2 == 0; });
}

std::string dtype(const JsonObject& cfg) {
  // transformers writes "dtype" since 4.56 and "torch_dtype" before.
  const char* key = cfg.find("dtype") ? "dtype" : "torch_dtype";
  const std::string value = cfg.get_string(key).value_or("");
  if (!value.empty() && value != "bfloat16" && value != "float16" && value != "float32") {
    cfg.fail(key, strformat("is '%s' (supported: bfloat16, float16, float32)", value.c_str()));
  }
  return value;
}

// transformers' Gemma3TextConfig defaults, for the keys a config.json leaves
// out (Gemma 3 4B and up write only what differs from them).
const nlohmann::json& gemma3_defaults() {
  static const nlohmann::json defaults = {
      {"vocab_size", 262208}, {"hidden_size", 2304}, {"intermediate_size", 9216}, {"num_hidden_layers", 26},
      {"num_attention_heads", 8}, {"num_key_value_heads", 4}, {"head_dim", 256},
      {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
      {"query_pre_attn_scalar", 256}, {"sliding_window", 4096}, {"rope_local_base_freq", 10000.0},
      {"sliding_window_pattern", 6}, {"hidden_activation", "gelu_pytorch_tanh"}, {"tie_word_embeddings", true}};
  return defaults;
}

// transformers' MistralConfig defaults for the keys a Mistral 3 image-text
// checkpoint's text_config may leave out.
const nlohmann::json& mistral_defaults() {
  static const nlohmann::json defaults = {{"hidden_act", "silu"},     {"rms_norm_eps", 1e-6},
                                          {"rope_theta", 10000.0},     {"sliding_window", 4096},
                                          {"tie_word_embeddings", false}, {"max_position_embeddings", 131072}};
  return defaults;
}

// The configuration of the text model to run: the file's top level, or for
// image-text checkpoints (Gemma 3's Gemma3ForConditionalGeneration, Mistral
// Small 3.1's Mistral3ForConditionalGeneration) their text_config, run as
// the text model they contain (the vision tower's tensors are not read;
// requests carry text only). Keys the text model's config leaves out take
// transformers' defaults.
nlohmann::json text_model_config(const JsonObject& top) {
  const nlohmann::json* list = top.find("architectures");
  auto named = [&](const char* name) { return list != nullptr && *list == nlohmann::json::array({name}); };
  const bool mistral_image = named("Mistral3ForConditionalGeneration");
  const bool multimodal = mistral_image || named("Gemma3ForConditionalGeneration");
  if (!multimodal && !named("Gemma3ForCausalLM")) return top.value();
  nlohmann::json merged = mistral_image ? mistral_defaults() : gemma3_defaults();
  const nlohmann::json& source = multimodal ? top.object("text_config").value() : top.value();
  for (const auto& [key, value] : source.items()) merged[key] = value;
  merged["architectures"] = nlohmann::json::array({mistral_image ? "MistralForCausalLM" : "Gemma3ForCausalLM"});
  if (mistral_image && top.find("tie_word_embeddings"))  // the composite model's flag
    merged["tie_word_embeddings"] = *top.find("tie_word_embeddings");
  for (const char* key : {"torch_dtype", "dtype"})  // the image-text config keeps the dtype at its top
    if (!merged.contains(key) && top.find(key)) merged[key] = *top.find(key);
  return merged;
}

}  // namespace

ModelConfig read_hf_config(const std::string& path) {
  const std::string file_path = std::filesystem::is_directory(path) ? path + "/config.json" : path;
  const JsonFile file = JsonFile::read(file_path);
  const nlohmann::json text = text_model_config(JsonObject(file.path, file.root, ""));
  const bool multimodal = file.root.is_object() && file.root.contains("text_config") && text.contains("architectures") &&
                          file.root.value("architectures", nlohmann::json()) != text["architectures"];
  const JsonObject cfg(file.path, text, multimodal ? "text_config" : "");
  const Architecture& arch = architecture(cfg);
  const bool gemma = arch.name == "gemma3";
  reject_unsupported(cfg, arch);

  ModelConfig c;
  c.architecture = std::string(arch.name);
  c.name = cfg.get_string("_name_or_path").value_or("");
  c.n_layers = positive_int(cfg, "num_hidden_layers");
  c.dim = positive_int(cfg, "hidden_size");
  c.ffn_dim = positive_int(cfg, "intermediate_size");
  c.n_heads = positive_int(cfg, "num_attention_heads");
  c.n_kv_heads = positive_int(cfg, "num_key_value_heads", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0) {
    cfg.fail("num_key_value_heads", strformat("%d does not divide num_attention_heads %d", c.n_kv_heads, c.n_heads));
  }
  if (!cfg.find("head_dim") && c.dim % c.n_heads != 0) {
    cfg.fail("num_attention_heads", strformat("%d does not divide hidden_size %d", c.n_heads, c.dim));
  }
  c.head_dim = positive_int(cfg, "head_dim", c.dim / c.n_heads);
  if (c.head_dim % 2 != 0) cfg.fail("head_dim", strformat("%d is odd; RoPE rotates pairs", c.head_dim));
  if (c.head_dim > 1024) cfg.fail("head_dim", strformat("%d is above 1,024, the RoPE kernels' bound", c.head_dim));
  c.rope_dims = rotated_dims(cfg, arch, c.head_dim);
  c.rope_layout = RopeLayout::kHalfSplit;
  const RopeSettings rope = rope_settings(cfg, gemma);
  if (arch.hf_name == "Phi3ForCausalLM" && rope.scale.yarn.factor > 0)  // transformers reads it as longrope there
    cfg.fail(cfg.find("rope_scaling") ? "rope_scaling" : "rope_parameters",
             "is 'yarn', which Phi-3 takes for 'longrope': not supported");
  c.rope_freq_base = rope.theta;
  c.rope_linear_scale = rope.scale.linear;
  c.rope_yarn = rope.scale.yarn;
  c.rope_llama3 = rope.scale.llama3;
  if (gemma && c.rope_yarn.factor > 0) cfg.fail("rope_scaling", "is YaRN, which Gemma 3's local layers do not take here");
  c.rope_local_freq_base = rope.local_theta;
  c.rms_eps = static_cast<float>(cfg.require_number("rms_norm_eps"));
  if (!(c.rms_eps > 0)) cfg.fail("rms_norm_eps", "must be positive");
  c.context_length = positive_int(cfg, "max_position_embeddings");
  const bool smollm3 = arch.hf_name == "SmolLM3ForCausalLM";
  if (smollm3) read_nope_layers(cfg, c);
  read_sliding_windows(cfg, arch, c);
  c.vocab_size = positive_int(cfg, "vocab_size");
  c.attention_bias = arch.qkv_bias || (arch.reads_attention_bias && cfg.get_bool("attention_bias").value_or(false));
  c.tied_embeddings = cfg.get_bool("tie_word_embeddings").value_or(gemma || smollm3);  // transformers' defaults
  c.qk_norm = arch.name == "qwen3" || arch.name == "qwen3moe";  // q_norm / k_norm over each head
  if (arch.hf_name == "MixtralForCausalLM" || arch.hf_name == "Qwen3MoeForCausalLM") read_experts(cfg, arch.hf_name, c);
  c.dtype = dtype(cfg);
  if (gemma) read_gemma3(cfg, c.dtype, c);
  if (arch.name == "gpt-oss") read_gpt_oss(cfg, c);
  return c;
}

}  // namespace exactly
