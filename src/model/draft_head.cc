#include "model/draft_head.h"

#include <cstring>

#include "core/check.h"
#include "core/ggml_types.h"
#include "model/draft_head_file.h"

namespace exactly {

namespace {

template <class Vector>
void grow(Vector& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

std::unique_ptr<DraftHead> DraftHead::load(const std::string& path, const LlamaModel& target) {
  return std::unique_ptr<DraftHead>(new DraftHead(GGUFFile::open(path), target));
}

DraftHead::DraftHead(std::unique_ptr<GGUFFile> file, const LlamaModel& target)
    : file_(std::move(file)), target_(target.weights()) {
  const DraftHeadFile read = DraftHeadFile::read(*file_, target.config());
  config_ = read.config;
  fc_ = read.fc;
  layer_ = read.layer;
  norm_ = read.norm;
  const ModelConfig& c = config_;
  // A partial head is the target head's rows of its tokens; a quantised row
  // is self-contained, so copying rows keeps their values.
  head_ = target_.output;
  const std::vector<int32_t>& target_ids = target.config().output_token_ids;
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
