// Hugging Face checkpoints written here tensor by tensor (safetensors from the
// format's definition, one file or shards behind an index), checked against a
// small config: every tensor found with its dtype and shape, conversions to
// bf16/f32 exact or rounded to nearest even, and every missing, ill-typed or
// ill-shaped tensor a FileFormatError naming the tensor and its file.
#include "model/hf_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/format.h"
#include "core/half.h"

namespace exactly {
namespace {

using Json = nlohmann::json;

struct Spec {
  std::string dtype;  // "BF16", "F16", "F32", "I32"
  std::vector<int64_t> shape;
};
using Checkpoint = std::map<std::string, Spec>;

// dim 8, ffn 16, 2 query heads and 1 KV head of 4 dims, 12 tokens, 2 layers.
ModelConfig tiny_config(bool bias = false, bool tied = false) {
  ModelConfig c;
  c.architecture = bias ? "qwen2" : "llama";
  c.n_layers = 2;
  c.dim = 8;
  c.ffn_dim = 16;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 4;
  c.rope_dims = 4;
  c.vocab_size = 12;
  c.context_length = 64;
  c.rope_layout = RopeLayout::kHalfSplit;
  c.attention_bias = bias;
  c.tied_embeddings = tied;
  return c;
}

// The tensors a checkpoint of `c` holds, all of `dtype`.
Checkpoint tensors_of(const ModelConfig& c, const std::string& dtype = "BF16") {
  const int64_t d = c.dim, f = c.ffn_dim, q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
  Checkpoint t;
  t["model.embed_tokens.weight"] = {dtype, {c.vocab_size, d}};
  if (!c.tied_embeddings) t["lm_head.weight"] = {dtype, {c.vocab_size, d}};
  t["model.norm.weight"] = {dtype, {d}};
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = strformat("model.layers.%d.", l);
    t[p + "input_layernorm.weight"] = {dtype, {d}};
    t[p + "self_attn.q_proj.weight"] = {dtype, {q, d}};
    t[p + "self_attn.k_proj.weight"] = {dtype, {kv, d}};
    t[p + "self_attn.v_proj.weight"] = {dtype, {kv, d}};
    if (c.attention_bias) {
      t[p + "self_attn.q_proj.bias"] = {dtype, {q}};
      t[p + "self_attn.k_proj.bias"] = {dtype, {kv}};
      t[p + "self_attn.v_proj.bias"] = {dtype, {kv}};
    }
    t[p + "self_attn.o_proj.weight"] = {dtype, {d, q}};
    t[p + "post_attention_layernorm.weight"] = {dtype, {d}};
    t[p + "mlp.gate_proj.weight"] = {dtype, {f, d}};
    t[p + "mlp.up_proj.weight"] = {dtype, {f, d}};
    t[p + "mlp.down_proj.weight"] = {dtype, {d, f}};
  }
  return t;
}

// Element i of every tensor: a value that tells tensors and positions apart
// and is not exactly representable in bf16 (so rounding is exercised).
float value_at(size_t tensor, size_t i) { return 0.001f * static_cast<float>(tensor + 1) + 0.0001237f * static_cast<float>(i); }

std::vector<uint8_t> encode(const Spec& s, size_t tensor) {
  int64_t n = 1;
  for (int64_t d : s.shape) n *= d;
  std::vector<uint8_t> out;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    const float v = value_at(tensor, i);
    uint8_t b[4];
    if (s.dtype == "F32" || s.dtype == "I32") {
      std::memcpy(b, &v, 4);
      out.insert(out.end(), b, b + 4);
    } else {
      const uint16_t h = s.dtype == "F16" ? float_to_half(v) : float_to_bf16(v);
      std::memcpy(b, &h, 2);
      out.insert(out.end(), b, b + 2);
    }
  }
  return out;
}

// A safetensors image of `tensors` (in name order, numbered as in `order`).
void write_file(const std::filesystem::path& path, const Checkpoint& tensors, const std::map<std::string, size_t>& order) {
  Json header = Json::object();
  std::string data;
  for (const auto& [name, spec] : tensors) {
    const std::vector<uint8_t> bytes = encode(spec, order.at(name));
    header[name] = {{"dtype", spec.dtype}, {"shape", spec.shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  const std::string text = header.dump();
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(uint64_t{text.size()} >> (8 * i)));
  std::ofstream(path, std::ios::binary) << out << text << data;
}

std::map<std::string, size_t> numbering(const Checkpoint& tensors) {
  std::map<std::string, size_t> order;
  for (const auto& [name, spec] : tensors) order.emplace(name, order.size());
  return order;
}

std::filesystem::path fresh_dir() {
  static int counter = 0;
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   ("hf_weights_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A directory holding model.safetensors.
std::string single_file(const Checkpoint& tensors) {
  const auto dir = fresh_dir();
  write_file(dir / "model.safetensors", tensors, numbering(tensors));
  return dir.string();
}

// A directory of two shards behind model.safetensors.index.json: the layers
// in the second shard, everything else in the first.
std::string sharded(const Checkpoint& tensors) {
  const auto dir = fresh_dir();
  Checkpoint a, b;
  Json map = Json::object();
  for (const auto& [name, spec] : tensors) {
    const bool layer = name.rfind("model.layers.", 0) == 0;
    (layer ? b : a)[name] = spec;
    map[name] = layer ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  }
  write_file(dir / "model-00001-of-00002.safetensors", a, numbering(tensors));
  write_file(dir / "model-00002-of-00002.safetensors", b, numbering(tensors));
  std::ofstream(dir / "model.safetensors.index.json") << Json{{"metadata", Json::object()}, {"weight_map", map}}.dump();
  return dir.string();
}

std::string error_of(const std::string& path, const ModelConfig& c) {
  try {
    HfWeights::open(path, c);
  } catch (const FileFormatError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(HfWeights, FindsEveryTensorOfTheConfig) {
  const ModelConfig c = tiny_config();
  const HfWeights w = HfWeights::open(single_file(tensors_of(c)), c);
  EXPECT_FALSE(w.tied());
  EXPECT_FALSE(w.qkv_bias());
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.token_embd->name, "model.embed_tokens.weight");
  EXPECT_EQ(w.output->name, "lm_head.weight");
  EXPECT_EQ(w.output_norm->name, "model.norm.weight");
  const HfLayerWeights& L = w.layers[1];
  EXPECT_EQ(L.wk->name, "model.layers.1.self_attn.k_proj.weight");
  EXPECT_EQ(L.wk->shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(L.wo->shape, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(L.w_down->shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(L.q_bias, nullptr);
}

TEST(HfWeights, TiedEmbeddingsIgnoreAnLmHead) {
  const ModelConfig c = tiny_config(false, true);
  Checkpoint t = tensors_of(c);
  EXPECT_TRUE(HfWeights::open(single_file(t), c).tied());
  t["lm_head.weight"] = {"BF16", {12, 8}};  // some exporters save the tied copy too
  const HfWeights w = HfWeights::open(single_file(t), c);
  EXPECT_TRUE(w.tied());
  EXPECT_EQ(w.output->name, "model.embed_tokens.weight");
}

TEST(HfWeights, ShardedQwen2WithBiases) {
  const ModelConfig c = tiny_config(true, true);
  const std::string dir = sharded(tensors_of(c, "F16"));
  const HfWeights w = HfWeights::open(dir, c);
  EXPECT_EQ(w.checkpoint->num_shards(), 2u);
  EXPECT_TRUE(w.qkv_bias());
  EXPECT_EQ(w.layers[0].v_bias->shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(w.checkpoint->file_of(*w.layers[0].wq), dir + "/model-00002-of-00002.safetensors");
  EXPECT_EQ(w.checkpoint->file_of(*w.token_embd), dir + "/model-00001-of-00002.safetensors");
}

TEST(HfWeights, ConvertsEveryDtypeToBf16AndF32) {
  for (const char* dtype : {"BF16", "F16", "F32"}) {
    const ModelConfig c = tiny_config();
    const Checkpoint t = tensors_of(c, dtype);
    const auto order = numbering(t);
    const HfWeights w = HfWeights::open(single_file(t), c);
    const SafetensorsTensor& wq = *w.layers[0].wq;
    const size_t id = order.at(wq.name);
    std::vector<uint16_t> bf16{0xabcd};  // appended after what is there
    append_as_bf16(wq, bf16);
    std::vector<float> f32;
    append_as_f32(wq, f32);
    ASSERT_EQ(bf16.size(), 1u + 64u);
    ASSERT_EQ(f32.size(), 64u);
    EXPECT_EQ(bf16[0], 0xabcd);
    for (size_t i = 0; i < 64; ++i) {
      const float v = value_at(id, i);
      // The stored value, exactly as f32 ...
      const float stored = std::string(dtype) == "F32"   ? v
                           : std::string(dtype) == "F16" ? half_to_float(float_to_half(v))
                                                         : bf16_to_float(float_to_bf16(v));
      EXPECT_EQ(f32[i], stored) << dtype << " element " << i;
      // ... and rounded once from it to bf16 (nearest even).
      EXPECT_EQ(bf16[1 + i], float_to_bf16(stored)) << dtype << " element " << i;
    }
  }
  // Round to nearest even at the tie: 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7.
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);
}

TEST(HfWeights, MissingTensorsAreNamed) {
  const ModelConfig c = tiny_config();
  for (const char* name : {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
                           "model.layers.1.mlp.up_proj.weight", "model.layers.0.self_attn.v_proj.weight",
                           "model.layers.1.post_attention_layernorm.weight"}) {
    Checkpoint t = tensors_of(c);
    t.erase(name);
    const std::string dir = single_file(t);
    const std::string e = error_of(dir, c);
    EXPECT_HAS(e, std::string("tensor '") + name + "' is missing");
    EXPECT_HAS(e, dir + "/model.safetensors");
  }
  EXPECT_HAS(error_of(single_file(tensors_of(tiny_config())), tiny_config(true)),
             "tensor 'model.layers.0.self_attn.q_proj.bias' is missing");
}

TEST(HfWeights, WrongShapesAndDtypesAreNamedWithTheirFile) {
  const ModelConfig c = tiny_config();
  Checkpoint t = tensors_of(c);
  t["model.layers.1.self_attn.k_proj.weight"].shape = {8, 8};  // as if n_kv_heads were 2
  std::string dir = sharded(t);
  std::string e = error_of(dir, c);
  EXPECT_HAS(e, dir + "/model-00002-of-00002.safetensors: tensor 'model.layers.1.self_attn.k_proj.weight'");
  EXPECT_HAS(e, "has shape [8, 8]; the config implies [4, 8]");

  t = tensors_of(c);
  t["model.embed_tokens.weight"].shape = {13, 8};  // a padded vocabulary the config does not say
  EXPECT_HAS(error_of(single_file(t), c), "'model.embed_tokens.weight' has shape [13, 8]; the config implies [12, 8]");
  t = tensors_of(c);
  t["model.norm.weight"].shape = {1, 8};
  EXPECT_HAS(error_of(single_file(t), c), "'model.norm.weight' has shape [1, 8]; the config implies [8]");
  t = tensors_of(c);
  t["model.layers.0.mlp.down_proj.weight"].shape = {16, 8};  // transposed
  EXPECT_HAS(error_of(single_file(t), c), "has shape [16, 8]; the config implies [8, 16]");

  t = tensors_of(c);
  t["model.layers.0.input_layernorm.weight"].dtype = "I32";
  dir = single_file(t);
  e = error_of(dir, c);
  EXPECT_HAS(e, dir + "/model.safetensors: tensor 'model.layers.0.input_layernorm.weight' has dtype I32");
  EXPECT_HAS(e, "supported: BF16, F16, F32");
}

TEST(HfWeights, BiasesMustMatchTheConfig) {
  // q/k/v biases the config does not ask for would be silently dropped.
  Checkpoint t = tensors_of(tiny_config(true));
  EXPECT_HAS(error_of(single_file(t), tiny_config(false)),
             "'model.layers.0.self_attn.q_proj.bias' is present, but config.json asks for no attention bias");
  // Llama's attention_bias also gives o_proj a bias, which the GPU model has no place for.
  t["model.layers.1.self_attn.o_proj.bias"] = {"BF16", {8}};
  EXPECT_HAS(error_of(single_file(t), tiny_config(true)),
             "'model.layers.1.self_attn.o_proj.bias' is an o_proj bias (Llama's attention_bias: true), which is not "
             "supported");
  t = tensors_of(tiny_config(true));
  t["model.layers.1.self_attn.k_proj.bias"].shape = {8};
  EXPECT_HAS(error_of(single_file(t), tiny_config(true)), "has shape [8]; the config implies [4]");
}

TEST(HfWeights, MoreLayersThanTheConfigIsAnError) {
  ModelConfig more = tiny_config();
  more.n_layers = 3;
  EXPECT_HAS(error_of(single_file(tensors_of(more)), tiny_config()),
             "'model.layers.2.input_layernorm.weight' belongs to a layer beyond num_hidden_layers (2)");
}

TEST(HfWeights, AMissingCheckpointIsAFileFormatError) {
  const auto dir = fresh_dir();
  EXPECT_HAS(error_of(dir.string(), tiny_config()), "model.safetensors");
}

}  // namespace
}  // namespace exactly
