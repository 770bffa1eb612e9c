// Writes a draft head with random weights for a target (model/draft_head.h's
// layout): its drafts are mostly wrong, which is what tests of exactness
// want — a draft's quality never changes the target's output law.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "loader/gguf_writer.h"
#include "model/config.h"

namespace exactly::testing {

// Uniform values in [-scale, scale) from splitmix64: the same on every platform.
inline std::vector<float> random_values(size_t n, uint64_t& state, float scale) {
  std::vector<float> out(n);
  for (float& v : out) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    v = scale * (static_cast<float>(z >> 40) / static_cast<float>(1 << 23) - 1.0f);
  }
  return out;
}

inline GGUFValue u32(uint64_t v) { return {GGUFValueType::UINT32, v}; }

// `ffn` is the layer's feed-forward size; `scale` the weights' range. A
// pass-through head has fc = [0 | I] and a layer that adds nothing (wo and
// w_down zero), so g_s = h_{s-1} / rms(h_{s-1}): its logits are the target's
// of the position before, flattened — drafts the target accepts at times,
// rejects at others, from a q spread over many tokens.
inline void write_random_head(const std::string& path, const ModelConfig& target, uint64_t seed, int64_t ffn = 64,
                              float scale = 0.08f, bool pass_through = false) {
  const std::string a = "exactly-draft-head.";
  const std::vector<std::pair<std::string, GGUFValue>> metadata = {
      {"general.architecture", {GGUFValueType::STRING, std::string("exactly-draft-head")}},
      {a + "embedding_length", u32(static_cast<uint64_t>(target.dim))},
      {a + "vocab_size", u32(static_cast<uint64_t>(target.vocab_size))},
      {a + "target_layer", u32(static_cast<uint64_t>(target.n_layers))},
      {a + "feed_forward_length", u32(static_cast<uint64_t>(ffn))},
      {a + "attention.head_count", u32(static_cast<uint64_t>(target.n_heads))},
      {a + "attention.head_count_kv", u32(static_cast<uint64_t>(target.n_kv_heads))},
  };
  const int64_t d = target.dim;
  const int64_t kv = int64_t{target.n_kv_heads} * target.head_dim;
  struct Spec {
    std::string name;
    std::vector<int64_t> shape;  // GGUF order
    bool norm;
  };
  const std::vector<Spec> specs = {
      {"fc.weight", {2 * d, d}, false},          {"blk.0.attn_norm.weight", {d}, true},
      {"blk.0.attn_q.weight", {d, d}, false},    {"blk.0.attn_k.weight", {d, kv}, false},
      {"blk.0.attn_v.weight", {d, kv}, false},   {"blk.0.attn_output.weight", {d, d}, false},
      {"blk.0.ffn_norm.weight", {d}, true},      {"blk.0.ffn_gate.weight", {d, ffn}, false},
      {"blk.0.ffn_up.weight", {d, ffn}, false},  {"blk.0.ffn_down.weight", {ffn, d}, false},
      {"output_norm.weight", {d}, true},
  };
  std::vector<std::vector<float>> data;
  std::vector<GGUFTensorToWrite> tensors;
  uint64_t state = seed;
  for (const Spec& s : specs) {
    size_t n = 1;
    for (int64_t x : s.shape) n *= static_cast<size_t>(x);
    data.push_back(s.norm ? std::vector<float>(n, 1.0f) : random_values(n, state, scale));
    if (!pass_through) continue;
    if (s.name == "fc.weight") {
      std::fill(data.back().begin(), data.back().end(), 0.0f);
      for (int64_t r = 0; r < d; ++r) data.back()[static_cast<size_t>(r * 2 * d + d + r)] = 1.0f;
    } else if (s.name == "blk.0.attn_output.weight" || s.name == "blk.0.ffn_down.weight") {
      std::fill(data.back().begin(), data.back().end(), 0.0f);
    }
  }
  for (size_t i = 0; i < specs.size(); ++i)
    tensors.push_back({specs[i].name, specs[i].shape, GGMLType::F32,
                       std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data[i].data()),
                                                data[i].size() * sizeof(float))});
  write_gguf(path, metadata, tensors);
}

}  // namespace exactly::testing
