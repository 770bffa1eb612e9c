// config.json of published checkpoints (values copied from their model cards'
// config.json) read into ModelConfig, and the errors for files we must refuse.
#include "model/hf_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/gguf.h"

namespace exactly {
namespace {

using nlohmann::json;

constexpr const char* kLlama3_8B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.40.0.dev0",
  "use_cache": true, "vocab_size": 128256})";

constexpr const char* kQwen25_05B = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true, "use_mrope": false,
  "use_sliding_window": false, "vocab_size": 151936})";

constexpr const char* kSmolLM2_135M = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": true,
  "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9,
  "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_interleaved": false, "rope_scaling": null, "rope_theta": 100000, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": true, "vocab_size": 49152})";

constexpr const char* kMistral7B_v01 = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
  "sliding_window": 4096, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.34.0.dev0", "use_cache": true, "vocab_size": 32000})";

constexpr const char* kGemma3_1B = R"({
  "architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attn_logit_softcapping": null, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 106],
  "final_logit_softcapping": null, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
  "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
  "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
  "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
  "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": true, "vocab_size": 262144})";

// Writes `text` as <fresh dir>/config.json and returns the file's path.
std::string write_config(const std::string& text) {
  static int counter = 0;
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   ("hf_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << text;
  return (dir / "config.json").string();
}

// `base` with `key` set to `value` (erased when value is "erase").
std::string edited(const char* base, const std::string& key, const json& value) {
  json j = json::parse(base);
  if (value == "erase") {
    j.erase(key);
  } else {
    j[key] = value;
  }
  return write_config(j.dump());
}

// The FileFormatError message of reading `path`, or "" when none is thrown.
std::string error_of(const std::string& path) {
  try {
    read_hf_config(path);
  } catch (const FileFormatError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(HfConfig, Llama3_8B) {
  const ModelConfig c = read_hf_config(write_config(kLlama3_8B));
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_layers, 32);
  EXPECT_EQ(c.dim, 4096);
  EXPECT_EQ(c.ffn_dim, 14336);
  EXPECT_EQ(c.n_heads, 32);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.rope_dims, 128);
  EXPECT_EQ(c.rope_freq_base, 500000.0f);
  EXPECT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.context_length, 8192);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.rope_layout, RopeLayout::kHalfSplit);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.dtype, "bfloat16");
}

TEST(HfConfig, Qwen25_05B) {
  const ModelConfig c = read_hf_config(write_config(kQwen25_05B));
  EXPECT_EQ(c.architecture, "qwen2");
  EXPECT_EQ(c.n_layers, 24);
  EXPECT_EQ(c.dim, 896);
  EXPECT_EQ(c.ffn_dim, 4864);
  EXPECT_EQ(c.n_heads, 14);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_freq_base, 1e6f);
  EXPECT_EQ(c.rms_eps, 1e-6f);
  EXPECT_EQ(c.context_length, 32768);  // use_sliding_window is false
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_TRUE(c.attention_bias);  // Qwen2's q/k/v biases are not in its config
  EXPECT_TRUE(c.tied_embeddings);
}

TEST(HfConfig, SmolLM2_135M) {
  const ModelConfig c = read_hf_config(write_config(kSmolLM2_135M));
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_layers, 30);
  EXPECT_EQ(c.dim, 576);
  EXPECT_EQ(c.n_heads, 9);
  EXPECT_EQ(c.n_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_freq_base, 100000.0f);  // written as an integer
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_FALSE(c.attention_bias);
}

// The GGUF of the default model was converted from this config.json: every
// hyperparameter both formats carry must agree.
TEST(HfConfig, SmolLM2AgreesWithItsGguf) {
  const char* src = std::getenv("EXACTLY_SOURCE_DIR");
  const std::string model = std::string(src ? src : ".") + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "model not found: " << model;
  const ModelConfig g = ModelConfig::from_gguf(*GGUFFile::open(model));
  const ModelConfig h = read_hf_config(write_config(kSmolLM2_135M));
  EXPECT_EQ(h.architecture, g.architecture);
  EXPECT_EQ(h.n_layers, g.n_layers);
  EXPECT_EQ(h.dim, g.dim);
  EXPECT_EQ(h.ffn_dim, g.ffn_dim);
  EXPECT_EQ(h.n_heads, g.n_heads);
  EXPECT_EQ(h.n_kv_heads, g.n_kv_heads);
  EXPECT_EQ(h.head_dim, g.head_dim);
  EXPECT_EQ(h.rope_dims, g.rope_dims);
  EXPECT_EQ(h.rope_freq_base, g.rope_freq_base);
  EXPECT_EQ(h.rms_eps, g.rms_eps);
  EXPECT_EQ(h.context_length, g.context_length);
  EXPECT_EQ(h.vocab_size, g.vocab_size);
  EXPECT_EQ(g.rope_layout, RopeLayout::kAdjacentPairs);  // the GGUF converter permuted q/k
}

TEST(HfConfig, MistralSlidesEveryLayerOverTheWholeContext) {
  ModelConfig c = read_hf_config(write_config(kMistral7B_v01));
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.context_length, 32768);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.layer_windows, std::vector<int32_t>(32, 4096));
  EXPECT_EQ(c.kv_window(), 4096) << "every layer slides: blocks before the window can go";
  cap_context_at_windows(c);  // the GPU's way: exact below the window
  EXPECT_EQ(c.context_length, 4096);
  EXPECT_EQ(c.layer_windows, std::vector<int32_t>(32, 4096)) << "the windows stay; none cuts the capped context";
  const ModelConfig unset = read_hf_config(edited(kMistral7B_v01, "sliding_window", nullptr));
  EXPECT_EQ(unset.context_length, 32768);
  EXPECT_TRUE(unset.layer_windows.empty());
  // Llama's transformers model ignores the key; capping is exact either way.
  const ModelConfig llama = read_hf_config(edited(kSmolLM2_135M, "sliding_window", 1024));
  EXPECT_EQ(llama.context_length, 1024);
  EXPECT_TRUE(llama.layer_windows.empty());
}

TEST(HfConfig, QwenSlidesTheLayersFromMaxWindowLayersOn) {
  json j = json::parse(kQwen25_05B);
  j["use_sliding_window"] = true;
  j["sliding_window"] = 512;
  j["max_window_layers"] = 20;
  ModelConfig c = read_hf_config(write_config(j.dump()));
  ASSERT_EQ(c.layer_windows.size(), 24u);
  for (int l = 0; l < 24; ++l) EXPECT_EQ(c.window_of(l), l >= 20 ? 512 : 0) << l;
  EXPECT_EQ(c.kv_window(), 0) << "global layers read the whole context";
  EXPECT_EQ(c.context_length, 32768);
  cap_context_at_windows(c);
  EXPECT_EQ(c.context_length, 512);
  j["max_window_layers"] = 0;
  EXPECT_EQ(read_hf_config(write_config(j.dump())).kv_window(), 512);
  j["use_sliding_window"] = false;
  EXPECT_TRUE(read_hf_config(write_config(j.dump())).layer_windows.empty());
}

TEST(HfConfig, DefaultsAndDirectories) {
  json j = json::parse(kSmolLM2_135M);
  for (const char* key : {"num_key_value_heads", "rope_theta", "tie_word_embeddings", "torch_dtype", "rope_scaling"}) {
    j.erase(key);
  }
  j["head_dim"] = 32;  // explicit head_dim wins over hidden_size / heads
  const std::string path = write_config(j.dump());
  const ModelConfig c = read_hf_config(std::filesystem::path(path).parent_path().string());
  EXPECT_EQ(c.n_kv_heads, 9);
  EXPECT_EQ(c.rope_freq_base, 10000.0f);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.dtype, "");
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_TRUE(read_hf_config(edited(kLlama3_8B, "attention_bias", true)).attention_bias);
  EXPECT_EQ(read_hf_config(edited(kLlama3_8B, "torch_dtype", "erase")).dtype, "");
  EXPECT_EQ(read_hf_config(edited(kLlama3_8B, "dtype", "float16")).dtype, "float16");
  EXPECT_EQ(read_hf_config(edited(kLlama3_8B, "rope_scaling", {{"rope_type", "default"}})).rope_freq_base, 5e5f);
}

TEST(HfConfig, UnsupportedArchitectureNamesFileAndValue) {
  const std::string path = edited(kLlama3_8B, "architectures", {"GemmaForCausalLM"});
  const std::string e = error_of(path);
  EXPECT_HAS(e, path);
  EXPECT_HAS(e, "'architectures'");
  EXPECT_HAS(e, "GemmaForCausalLM");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "architectures", "LlamaForCausalLM")), "must be a list");
}

TEST(HfConfig, MissingAndIllTypedKeysAreNamed) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "rms_norm_eps", "max_position_embeddings", "vocab_size", "architectures"}) {
    const std::string path = edited(kLlama3_8B, key, "erase");
    const std::string e = error_of(path);
    EXPECT_HAS(e, path);
    EXPECT_HAS(e, std::string("'") + key + "' is missing");
  }
  EXPECT_HAS(error_of(edited(kLlama3_8B, "hidden_size", "4096")), "'hidden_size' must be an integer");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "num_hidden_layers", 32.5)), "'num_hidden_layers' must be an integer");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "num_hidden_layers", 0)), "'num_hidden_layers' has invalid value 0");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "rope_theta", "big")), "'rope_theta' must be a number");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "tie_word_embeddings", 1)), "'tie_word_embeddings' must be true or false");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "torch_dtype", "int8")), "'torch_dtype' is 'int8'");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "num_key_value_heads", 6)), "'num_key_value_heads' 6 does not divide");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "num_attention_heads", 24)), "24 does not divide hidden_size 4096");
}

// Llama 3.1's config.json: its scaling read, then each key it needs refused when missing or wrong.
TEST(HfConfig, Llama3RopeScaling) {
  const json llama31_scaling = {{"factor", 8.0},
                                {"low_freq_factor", 1.0},
                                {"high_freq_factor", 4.0},
                                {"original_max_position_embeddings", 8192},
                                {"rope_type", "llama3"}};
  const ModelConfig c = read_hf_config(edited(kLlama3_8B, "rope_scaling", llama31_scaling));
  EXPECT_EQ(c.rope_llama3.factor, 8.0f);
  EXPECT_EQ(c.rope_llama3.low_freq_factor, 1.0f);
  EXPECT_EQ(c.rope_llama3.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_llama3.original_context, 8192);
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}) {
    json missing = llama31_scaling;
    missing.erase(key);
    EXPECT_HAS(error_of(edited(kLlama3_8B, "rope_scaling", missing)), std::string("'rope_scaling.") + key + "' is missing");
  }
  json inverted = llama31_scaling;
  inverted["high_freq_factor"] = 0.5;
  EXPECT_HAS(error_of(edited(kLlama3_8B, "rope_scaling", inverted)), "must exceed low_freq_factor");
  inverted["high_freq_factor"] = -4.0;
  EXPECT_HAS(error_of(edited(kLlama3_8B, "rope_scaling", inverted)), "positive");
}

TEST(HfConfig, RefusesWhatWouldComputeSomethingElse) {
  EXPECT_HAS(error_of(edited(kLlama3_8B, "rope_scaling", {{"type", "longrope"}, {"factor", 2.0}})), "type 'longrope'");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "rope_scaling", {{"type", "linear"}})), "'rope_scaling.factor' is missing");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "rope_scaling", {{"type", "linear"}, {"factor", -2.0}})), "positive");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "rope_scaling", "yarn")), "'rope_scaling' is string, not an object");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "hidden_act", "gelu")), "'hidden_act' is 'gelu'");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "mlp_bias", true)), "'mlp_bias'");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "quantization_config", {{"quant_method", "gptq"}})), "quantized");
}

TEST(HfConfig, Gemma3TextModel) {
  const ModelConfig c = read_hf_config(write_config(kGemma3_1B));
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.n_kv_heads, 1);
  EXPECT_TRUE(c.qk_norm && c.sandwich_norms && c.tied_embeddings);
  EXPECT_EQ(c.activation, MlpActivation::kGeluTanh);
  EXPECT_EQ(c.context_length, 32768);  // sliding layers are computed as such, not capped
  EXPECT_EQ(c.rope_freq_base, 1e6f);
  EXPECT_EQ(c.rope_local_freq_base, 1e4f);
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / 16.0f);
  EXPECT_EQ(c.embedding_scale, 34.0f);  // sqrt(1152) = 33.941 rounded to bf16, as transformers multiplies
  ASSERT_EQ(c.layer_windows.size(), 26u);
  for (int l = 0; l < 26; ++l) EXPECT_EQ(c.window_of(l), (l + 1) % 6 == 0 ? 0 : 512) << l;
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
  // Gemma 3 4B's linear scaling of the global layers; layer_types over a pattern; a final soft cap.
  EXPECT_EQ(read_hf_config(edited(kGemma3_1B, "rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}))
                .rope_linear_scale, 8.0f);
  json types = json::array();
  for (int l = 0; l < 26; ++l) types.push_back(l % 2 ? "full_attention" : "sliding_attention");
  const ModelConfig alt = read_hf_config(edited(kGemma3_1B, "layer_types", types));
  EXPECT_EQ(alt.window_of(0), 512);
  EXPECT_EQ(alt.window_of(1), 0);
  EXPECT_EQ(c.kv_window(), 0) << "Gemma 3's global layers keep every block";
  const ModelConfig all_sliding =
      read_hf_config(edited(kGemma3_1B, "layer_types", json(std::vector<std::string>(26, "sliding_attention"))));
  EXPECT_EQ(all_sliding.kv_window(), 512);
  EXPECT_EQ(read_hf_config(edited(kGemma3_1B, "final_logit_softcapping", 30.0)).final_logit_softcap, 30.0f);
  EXPECT_EQ(read_hf_config(edited(kGemma3_1B, "torch_dtype", "float32")).embedding_scale, std::sqrt(1152.0f));
  // transformers 5: one RoPE object per layer type.
  json j = json::parse(kGemma3_1B);
  j.erase("rope_theta");
  j.erase("rope_local_base_freq");
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  const ModelConfig v5 = read_hf_config(write_config(j.dump()));
  EXPECT_EQ(v5.rope_freq_base, 1e6f);
  EXPECT_EQ(v5.rope_local_freq_base, 1e4f);
  EXPECT_EQ(v5.rope_linear_scale, 8.0f);
  j["rope_parameters"]["sliding_attention"]["rope_type"] = "linear";
  EXPECT_HAS(error_of(write_config(j.dump())), "'rope_parameters.sliding_attention' has type 'linear'");
}

// Gemma 3 4B's image-text config.json: the text model's keys under
// text_config, most left to transformers' defaults, the dtype at the top.
TEST(HfConfig, Gemma3ImageTextCheckpointRunsItsTextModel) {
  const ModelConfig c = read_hf_config(write_config(R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}})"));
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.dim, 2560);
  EXPECT_EQ(c.n_layers, 34);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.vocab_size, 262208);
  EXPECT_EQ(c.context_length, 131072);
  EXPECT_EQ(c.rope_linear_scale, 8.0f);
  EXPECT_EQ(c.window_of(0), 1024);
  EXPECT_EQ(c.window_of(5), 0);
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_TRUE(c.tied_embeddings);
  const std::string bad = write_config(R"({"architectures": ["Gemma3ForConditionalGeneration"],
    "text_config": {"num_hidden_layers": 0}})");
  EXPECT_HAS(error_of(bad), "'text_config.num_hidden_layers' has invalid value 0");
}

TEST(HfConfig, Gemma3RefusesWhatWouldComputeSomethingElse) {
  EXPECT_HAS(error_of(edited(kGemma3_1B, "hidden_activation", "gelu")), "'hidden_activation' is 'gelu'");
  EXPECT_HAS(error_of(edited(kGemma3_1B, "attn_logit_softcapping", 50.0)), "'attn_logit_softcapping'");
  EXPECT_HAS(error_of(edited(kGemma3_1B, "use_bidirectional_attention", true)), "'use_bidirectional_attention'");
  EXPECT_HAS(error_of(edited(kGemma3_1B, "layer_types", {"sliding_attention"})), "one type per layer (26)");
  EXPECT_HAS(error_of(edited(kGemma3_1B, "sliding_window", 0)), "'sliding_window' has invalid value 0");
  EXPECT_EQ(read_hf_config(edited(kGemma3_1B, "sliding_window", "erase")).window_of(0), 4096);  // the default
  EXPECT_HAS(error_of(edited(kGemma3_1B, "query_pre_attn_scalar", -1)), "'query_pre_attn_scalar' must be positive");
}

// Linear RoPE scaling on any family: the positions divided by the factor.
TEST(HfConfig, LinearRopeScaling) {
  EXPECT_EQ(read_hf_config(edited(kLlama3_8B, "rope_scaling", {{"type", "linear"}, {"factor", 2.0}})).rope_linear_scale,
            2.0f);
  EXPECT_EQ(read_hf_config(write_config(kLlama3_8B)).rope_linear_scale, 1.0f);
}

// YaRN with transformers' defaults and its ways of giving the attention factor.
TEST(HfConfig, YarnRopeScaling) {
  const YarnScaling y = read_hf_config(edited(kLlama3_8B, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}))
                            .rope_yarn;
  EXPECT_EQ(y.factor, 4.0f);
  EXPECT_EQ(y.original_context, 8192);  // max_position_embeddings
  EXPECT_EQ(y.beta_fast, 32.0f);
  EXPECT_EQ(y.beta_slow, 1.0f);
  EXPECT_TRUE(y.truncate);
  EXPECT_FLOAT_EQ(y.attention_factor, static_cast<float>(0.1 * std::log(4.0) + 1.0));
  const YarnScaling g = read_hf_config(edited(kLlama3_8B, "rope_scaling",
                                              {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 16.0},
                                               {"original_max_position_embeddings", 4096}, {"truncate", false},
                                               {"mscale", 0.707}, {"mscale_all_dim", 1.0}}))
                            .rope_yarn;
  EXPECT_EQ(g.original_context, 4096);
  EXPECT_EQ(g.beta_fast, 16.0f);
  EXPECT_FALSE(g.truncate);
  EXPECT_FLOAT_EQ(g.attention_factor,
                  static_cast<float>((0.1 * 0.707 * std::log(32.0) + 1) / (0.1 * std::log(32.0) + 1)));
  EXPECT_EQ(read_hf_config(edited(kLlama3_8B, "rope_scaling",
                                  {{"rope_type", "yarn"}, {"factor", 2.0}, {"attention_factor", 1.5}}))
                .rope_yarn.attention_factor,
            1.5f);
  // transformers reads `beta_fast or 32`: null and 0 are the defaults.
  const YarnScaling z = read_hf_config(edited(kLlama3_8B, "rope_scaling",
                                              {{"rope_type", "yarn"}, {"factor", 2.0}, {"beta_fast", nullptr},
                                               {"beta_slow", 0}}))
                            .rope_yarn;
  EXPECT_EQ(z.beta_fast, 32.0f);
  EXPECT_EQ(z.beta_slow, 1.0f);
  EXPECT_HAS(error_of(edited(kLlama3_8B, "rope_scaling", {{"rope_type", "yarn"}})), "factor");
  EXPECT_HAS(error_of(edited(kLlama3_8B, "rope_scaling", {{"rope_type", "yarn"}, {"factor", -1.0}})), "factor");
}

// transformers 5 keeps rope_theta inside rope_parameters and writes no top-level key.
TEST(HfConfig, Transformers5RopeParameters) {
  json j = json::parse(kLlama3_8B);
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  EXPECT_EQ(read_hf_config(write_config(j.dump())).rope_freq_base, 5e5f);
  j["rope_theta"] = 250000.0;  // the top-level key, when both are written, wins
  EXPECT_EQ(read_hf_config(write_config(j.dump())).rope_freq_base, 2.5e5f);
  j["rope_parameters"]["rope_type"] = "longrope";
  EXPECT_HAS(error_of(write_config(j.dump())), "'rope_parameters' has type 'longrope'");
}

TEST(HfConfig, UnreadableFilesNameThePath) {
  const std::string bad = write_config("{\"architectures\": [");
  EXPECT_HAS(error_of(bad), bad + ": not valid JSON");
  EXPECT_HAS(error_of(write_config("[1, 2]")), "the top level is array, not a JSON object");
  EXPECT_HAS(error_of("/nonexistent/config.json"), "/nonexistent/config.json: cannot open");
}

}  // namespace
}  // namespace exactly
