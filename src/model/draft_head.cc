#include "model/draft_head.h"

#include <cstring>
#include <set>

#include "core/check.h"
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

template <class Vector>
void grow(Vector& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

std::unique_ptr<DraftHead> DraftHead::load(const std::string& path, const LlamaModel& target) {
  return std::unique_ptr<DraftHead>(new DraftHead(GGUFFile::open(path), target));
}

DraftHead::DraftHead(std::unique_ptr<GGUFFile> file, const LlamaModel& target)
    : file_(std::move(file)), config_(head_config(*file_, target.config())), target_(target.weights()) {
  const GGUFFile& f = *file_;
  const ModelConfig& c = config_;
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  fc_ = matrix(f, "fc.weight", c.dim, 2 * int64_t{c.dim});
  layer_.attn_norm = vector_f32(f, "blk.0.attn_norm.weight", c.dim);
  layer_.wq = matrix(f, "blk.0.attn_q.weight", q_dim, c.dim);
  layer_.wk = matrix(f, "blk.0.attn_k.weight", kv_dim, c.dim);
  layer_.wv = matrix(f, "blk.0.attn_v.weight", kv_dim, c.dim);
  layer_.wo = matrix(f, "blk.0.attn_output.weight", c.dim, q_dim);
  layer_.ffn_norm = vector_f32(f, "blk.0.ffn_norm.weight", c.dim);
  layer_.w_gate = matrix(f, "blk.0.ffn_gate.weight", c.ffn_dim, c.dim);
  layer_.w_up = matrix(f, "blk.0.ffn_up.weight", c.ffn_dim, c.dim);
  layer_.w_down = matrix(f, "blk.0.ffn_down.weight", c.dim, c.ffn_dim);
  norm_ = vector_f32(f, "output_norm.weight", c.dim);
  const std::set<std::string> known = {"fc.weight",          "blk.0.attn_norm.weight", "blk.0.attn_q.weight",
                                       "blk.0.attn_k.weight", "blk.0.attn_v.weight",   "blk.0.attn_output.weight",
                                       "blk.0.ffn_norm.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
                                       "blk.0.ffn_down.weight", "output_norm.weight"};
  for (const GGUFTensorInfo& t : f.tensors())
    if (!known.count(t.name)) fail(f, strformat("unexpected tensor '%s' (a head holds fc, blk.0.* and output_norm)",
                                               t.name.c_str()));
  // A partial head is the target head's rows of its tokens; a quantised row
  // is self-contained, so copying rows keeps their values.
  head_ = target_.output;
  const std::vector<int32_t>& target_ids = target.config().output_token_ids;
  if (!target_ids.empty() && !c.output_token_ids.empty())
    fail(f, strformat("'%s' is set, but the target's own head is partial already", kOutputTokenIdsKey));
  if (!target_ids.empty()) config_.output_token_ids = target_ids;  // the target's rows are the head's
  if (!c.output_token_ids.empty() && target_ids.empty()) {
    const int64_t row_bytes = ggml_row_bytes(head_.type, head_.cols);
    head_rows_.resize(static_cast<size_t>(row_bytes) * c.output_token_ids.size());
    for (size_t i = 0; i < c.output_token_ids.size(); ++i)
      std::memcpy(head_rows_.data() + static_cast<int64_t>(i) * row_bytes,
                  static_cast<const uint8_t*>(head_.data) + int64_t{c.output_token_ids[i]} * row_bytes,
                  static_cast<size_t>(row_bytes));
    head_ = {head_.type, head_rows_.data(), static_cast<int64_t>(c.output_token_ids.size()), head_.cols};
  }
}

int64_t DraftHead::weight_bytes() const {
  auto bytes = [](const kernels::WeightMatrix& w) { return w.rows * ggml_row_bytes(w.type, w.cols); };
  const LlamaLayerWeights& L = layer_;
  return bytes(fc_) + bytes(L.wq) + bytes(L.wk) + bytes(L.wv) + bytes(L.wo) + bytes(L.w_gate) + bytes(L.w_up) +
         bytes(L.w_down) + bytes(head_) + 3 * int64_t{config_.dim} * 4;
}

std::unique_ptr<KVPool> DraftHead::make_kv_pool(int64_t num_blocks, int block_size) {
  return std::make_unique<KVStorage>(config_, num_blocks, block_size);
}

void DraftHead::ensure_scratch(int64_t n) {
  const ModelConfig& c = config_;
  grow(cat_, n * 2 * c.dim);
  grow(emb_, n * c.dim);
  grow(x_, n * c.dim);
  grow(h_, n * c.dim);
  grow(q_, n * c.n_heads * c.head_dim);
  grow(k_, n * c.n_kv_heads * c.head_dim);
  grow(v_, n * c.n_kv_heads * c.head_dim);
  grow(attn_, n * c.n_heads * c.head_dim);
  grow(proj_, n * c.dim);
  grow(gate_, n * c.ffn_dim);
  grow(up_, n * c.ffn_dim);
  grow(rope_cos_, n * (c.rope_dims / 2));
  grow(rope_sin_, n * (c.rope_dims / 2));
}

void DraftHead::forward(const ForwardBatch& batch, KVPool& kv_pool, float* logits, ThreadPool& pool, int num_layers,
                        int32_t* argmax) {
  auto* kv = dynamic_cast<KVStorage*>(&kv_pool);
  EXACTLY_CHECK(kv != nullptr, "the draft head was given a KV pool of another device");
  check_forward_batch(batch, *this, num_layers);
  const ModelInput& b = batch.input;  // a CPU model reads no row jobs
  const ModelConfig& c = config_;
  const int64_t n = b.num_tokens();
  const int64_t dim = c.dim;
  EXACTLY_CHECK(static_cast<int64_t>(b.hidden_in.size()) == n * dim, "hidden_in has %zu floats for %lld tokens",
                b.hidden_in.size(), static_cast<long long>(n));
  ensure_scratch(n);

  kernels::embedding_lookup(target_.token_embd, b.tokens.data(), n, emb_.data());
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(cat_.data() + t * 2 * dim, emb_.data() + t * dim, static_cast<size_t>(dim) * sizeof(float));
    std::memcpy(cat_.data() + t * 2 * dim + dim, b.hidden_in.data() + t * dim,
                static_cast<size_t>(dim) * sizeof(float));
  }
  float* x = x_.data();
  kernels::matmul(fc_, cat_.data(), n, x, pool);
  kernels::rope_angles(b.positions.data(), n, c.rope_dims, c.rope_freq_base, rope_cos_.data(), rope_sin_.data());
  const LayerBuffers buf{h_.data(),    q_.data(),    k_.data(),  v_.data(),        attn_.data(),
                         proj_.data(), gate_.data(), up_.data(), rope_cos_.data(), rope_sin_.data()};
  const kernels::AttentionBatch attn_batch{b.num_seqs(), b.query_start.data(), b.seq_lens.data(),
                                           b.block_tables.data(), b.max_blocks_per_seq};
  llama_layer(layer_, c, x, n, buf, LayerKV{kv->layer(0), b.slot_mapping.data(), attn_batch}, pool);

  const auto n_hidden = static_cast<int64_t>(b.hidden_rows.size());
  grow(hidden_out_, n_hidden * dim);
  hidden_size_ = static_cast<size_t>(n_hidden * dim);
  for (int64_t i = 0; i < n_hidden; ++i)
    kernels::rmsnorm(x + int64_t{b.hidden_rows[static_cast<size_t>(i)]} * dim, norm_, 1, dim, c.rms_eps,
                     hidden_out_.data() + i * dim);
  const auto n_out = static_cast<int64_t>(b.logits_rows.size());
  if (n_out == 0) return;
  grow(last_, n_out * dim);
  for (int64_t i = 0; i < n_out; ++i)
    kernels::rmsnorm(x + int64_t{b.logits_rows[static_cast<size_t>(i)]} * dim, norm_, 1, dim, c.rms_eps,
                     last_.data() + i * dim);
  output_logits(head_, c.output_token_ids, c.vocab_size, last_.data(), n_out, logits, argmax, part_, pool);
}

}  // namespace exactly
