#include "model/draft_head_file.h"

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/format.h"
#include "core/ggml_types.h"

namespace exactly {

namespace {

constexpr const char* kArch = "exactly-draft-head";
constexpr const char* kOutputTokenIdsKey = "exactly.output_token_ids";

[[noreturn]] void fail(const GGUFFile& f, const std::string& what) {
  throw FileFormatError(strformat("%s: %s", f.path().c_str(), what.c_str()));
}

int32_t positive_int(const GGUFFile& f, const std::string& key) {
  const int64_t v = f.require_int(key);
  if (v <= 0 || v > (int64_t{1} << 30))
    fail(f, strformat("metadata key '%s' has invalid value %lld", key.c_str(), static_cast<long long>(v)));
  return static_cast<int32_t>(v);
}

// A key that must equal what the target has.
void expect_equal(const GGUFFile& f, const std::string& key, int64_t target, const char* what) {
  const int64_t v = positive_int(f, key);
  if (v != target)
    fail(f, strformat("'%s' is %lld but the target's %s is %lld: the head was made for another model", key.c_str(),
                      static_cast<long long>(v), what, static_cast<long long>(target)));
}

ModelConfig head_config(const GGUFFile& f, const ModelConfig& target) {
  const std::string arch = f.require_string("general.architecture");
  if (arch != kArch) fail(f, strformat("architecture '%s' is not a draft head ('%s')", arch.c_str(), kArch));
  const std::string a = std::string(kArch) + ".";
  expect_equal(f, a + "embedding_length", target.dim, "hidden size");
  expect_equal(f, a + "vocab_size", target.vocab_size, "vocabulary size");
  expect_equal(f, a + "target_layer", target.n_layers, "number of layers");
  ModelConfig c;
  c.architecture = arch;
  c.name = f.get_string("general.name").value_or("");
  c.n_layers = 1;
  c.dim = target.dim;
  c.vocab_size = target.vocab_size;
  c.context_length = target.context_length;
  c.ffn_dim = positive_int(f, a + "feed_forward_length");
  c.n_heads = positive_int(f, a + "attention.head_count");
  c.n_kv_heads = positive_int(f, a + "attention.head_count_kv");
  if (c.dim % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0)
    fail(f, strformat("%d heads do not divide the hidden size %d into %d KV groups", c.n_heads, c.dim, c.n_kv_heads));
  c.head_dim = c.dim / c.n_heads;
  c.rope_dims = f.find(a + "rope.dimension_count") ? positive_int(f, a + "rope.dimension_count") : c.head_dim;
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0)
    fail(f, strformat("rope.dimension_count %d is invalid for head dim %d", c.rope_dims, c.head_dim));
  c.rope_freq_base = static_cast<float>(f.get_float(a + "rope.freq_base").value_or(10000.0));
  c.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(c.rope_freq_base > 0) || !(c.rms_eps > 0))
    fail(f, "rope.freq_base and layer_norm_rms_epsilon must be positive");
  if (f.find(kOutputTokenIdsKey)) {
    const auto ids = f.get_int_array(kOutputTokenIdsKey);
    if (!ids || ids->empty()) fail(f, strformat("'%s' should be a non-empty array of token ids", kOutputTokenIdsKey));
    for (size_t i = 0; i < ids->size(); ++i) {
      const int64_t id = (*ids)[i];
      if (id < 0 || id >= c.vocab_size || (i > 0 && id <= (*ids)[i - 1]))
        fail(f, strformat("%s[%zu] = %lld: the ids must increase strictly and lie in [0, %d)", kOutputTokenIdsKey, i,
                          static_cast<long long>(id), c.vocab_size));
      c.output_token_ids.push_back(static_cast<int32_t>(id));
    }
  }
  return c;
}

std::string join_ints(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out;
}

const GGUFTensorInfo& tensor(const GGUFFile& f, const std::string& name, std::vector<int64_t> shape) {
  const GGUFTensorInfo& t = f.require_tensor(name);
  if (t.shape != shape)
    fail(f, strformat("tensor '%s' should have shape [%s]", name.c_str(), join_ints(shape).c_str()));
  if (t.type != GGMLType::F32 && (t.type != GGMLType::F16 || shape.size() != 2))
    fail(f, strformat("tensor '%s' should be F32%s", name.c_str(), shape.size() == 2 ? " or F16" : ""));
  return t;
}

kernels::WeightMatrix matrix(const GGUFFile& f, const std::string& name, int64_t rows, int64_t cols) {
  const GGUFTensorInfo& t = tensor(f, name, {cols, rows});
  return {t.type, t.data, rows, cols};
}

const float* vector_f32(const GGUFFile& f, const std::string& name, int64_t n) {
  return reinterpret_cast<const float*>(tensor(f, name, {n}).data);
}

}  // namespace

DraftHeadFile DraftHeadFile::read(const GGUFFile& f, const ModelConfig& target) {
  DraftHeadFile h;
  h.config = head_config(f, target);
  const ModelConfig& c = h.config;
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  h.fc = matrix(f, "fc.weight", c.dim, 2 * int64_t{c.dim});
  LlamaLayerWeights& L = h.layer;
  L.attn_norm = vector_f32(f, "blk.0.attn_norm.weight", c.dim);
  L.wq = matrix(f, "blk.0.attn_q.weight", q_dim, c.dim);
  L.wk = matrix(f, "blk.0.attn_k.weight", kv_dim, c.dim);
  L.wv = matrix(f, "blk.0.attn_v.weight", kv_dim, c.dim);
  L.wo = matrix(f, "blk.0.attn_output.weight", c.dim, q_dim);
  L.ffn_norm = vector_f32(f, "blk.0.ffn_norm.weight", c.dim);
  L.w_gate = matrix(f, "blk.0.ffn_gate.weight", c.ffn_dim, c.dim);
  L.w_up = matrix(f, "blk.0.ffn_up.weight", c.ffn_dim, c.dim);
  L.w_down = matrix(f, "blk.0.ffn_down.weight", c.dim, c.ffn_dim);
  h.norm = vector_f32(f, "output_norm.weight", c.dim);
  const std::set<std::string> known = {"fc.weight",          "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
                                       "blk.0.attn_k.weight", "blk.0.attn_v.weight",   "blk.0.attn_output.weight",
                                       "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
                                       "blk.0.ffn_down.weight", "output_norm.weight"};
  for (const GGUFTensorInfo& t : f.tensors())
    if (!known.count(t.name)) fail(f, strformat("unexpected tensor '%s' (a head holds fc, blk.0.* and output_norm)",
                                               t.name.c_str()));
  if (!target.output_token_ids.empty() && !c.output_token_ids.empty())
    fail(f, strformat("'%s' is set, but the target's own head is partial already", kOutputTokenIdsKey));
  return h;
}

}  // namespace exactly
