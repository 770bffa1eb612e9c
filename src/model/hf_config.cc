#include "model/hf_config.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "core/format.h"
#include "loader/json_file.h"

namespace exactly {
namespace {

struct Architecture {
  std::string_view hf_name;   // config.json "architectures"
  std::string_view name;      // ModelConfig::architecture, as GGUF names it
  bool qkv_bias;              // biases on q/k/v whatever the config says (Qwen2's are hard-wired)
  bool reads_attention_bias;  // config.json "attention_bias" applies
};

constexpr std::array<Architecture, 6> kArchitectures = {{
    {"LlamaForCausalLM", "llama", false, true},
    {"MistralForCausalLM", "llama", false, false},
    {"MixtralForCausalLM", "llama", false, false},
    {"Qwen2ForCausalLM", "qwen2", true, false},
    {"Qwen3ForCausalLM", "qwen3", false, true},
    {"Qwen3MoeForCausalLM", "qwen3moe", false, true},
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
  c.n_experts = positive_int(cfg, mixtral ? "num_local_experts" : "num_experts");
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
  cfg.fail("architectures", strformat("names '%s', which is not supported (supported: LlamaForCausalLM, "
                                      "MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM)",
                                      name.c_str()));
}

// Settings under which the checkpoint computes something we do not: refusing
// them is better than generating plausible but wrong text.
void reject_unsupported(const JsonObject& cfg) {
  if (const auto act = cfg.get_string("hidden_act"); act && *act != "silu") {
    cfg.fail("hidden_act", strformat("is '%s'; only silu is supported", act->c_str()));
  }
  if (cfg.get_bool("mlp_bias").value_or(false)) cfg.fail("mlp_bias", "is true; MLP biases are not supported");
  if (cfg.find("quantization_config"))
    cfg.fail("quantization_config", "is set; quantized checkpoints are not supported");
  // transformers 5 writes rope_parameters (with rope_theta inside) where 4.x wrote rope_scaling.
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const nlohmann::json* scaling = cfg.find(key);
    if (scaling == nullptr) continue;
    const JsonObject s(cfg.path(), *scaling, cfg.key_path(key));
    const auto type = s.find("rope_type") ? s.get_string("rope_type") : s.get_string("type");
    if (type != "default") {
      cfg.fail(key, strformat("has type '%s', which is not supported (only null or \"default\")",
                              type ? type->c_str() : "(none)"));
    }
  }
}

// rope_theta at the top level (transformers 4.x), else rope_parameters.rope_theta (5.x).
float rope_theta(const JsonObject& cfg) {
  std::optional<double> theta = cfg.get_number("rope_theta");
  if (!theta && cfg.find("rope_parameters")) {
    theta = JsonObject(cfg.path(), *cfg.find("rope_parameters"), cfg.key_path("rope_parameters")).get_number("rope_theta");
  }
  if (!(theta.value_or(10000.0) > 0)) cfg.fail("rope_theta", "must be positive");
  return static_cast<float>(theta.value_or(10000.0));
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

}  // namespace

ModelConfig read_hf_config(const std::string& path) {
  const std::string file_path = std::filesystem::is_directory(path) ? path + "/config.json" : path;
  const JsonFile file = JsonFile::read(file_path);
  const JsonObject cfg(file.path, file.root, "");
  const Architecture& arch = architecture(cfg);
  reject_unsupported(cfg);

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
  c.rope_dims = c.head_dim;
  c.rope_layout = RopeLayout::kHalfSplit;
  c.rope_freq_base = rope_theta(cfg);
  c.rms_eps = static_cast<float>(cfg.require_number("rms_norm_eps"));
  if (!(c.rms_eps > 0)) cfg.fail("rms_norm_eps", "must be positive");
  c.context_length = positive_int(cfg, "max_position_embeddings");
  // Below the window, sliding-window attention is full attention; capping the
  // context there keeps every computation exact.
  const bool qwen = arch.hf_name.starts_with("Qwen");
  const bool sliding = qwen ? cfg.get_bool("use_sliding_window").value_or(false)
                            : cfg.find("sliding_window") != nullptr && !cfg.find("sliding_window")->is_null();
  if (sliding) c.context_length = std::min(c.context_length, positive_int(cfg, "sliding_window"));
  c.vocab_size = positive_int(cfg, "vocab_size");
  c.attention_bias = arch.qkv_bias || (arch.reads_attention_bias && cfg.get_bool("attention_bias").value_or(false));
  c.tied_embeddings = cfg.get_bool("tie_word_embeddings").value_or(false);
  c.qk_norm = arch.name == "qwen3" || arch.name == "qwen3moe";  // q_norm / k_norm over each head
  if (arch.hf_name == "MixtralForCausalLM" || arch.hf_name == "Qwen3MoeForCausalLM") read_experts(cfg, arch.hf_name, c);
  c.dtype = dtype(cfg);
  return c;
}

}  // namespace exactly
