#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"
#include "core/ggml_types.h"
#include "loader/gguf.h"

namespace exactly {

namespace {

kernels::WeightMatrix matrix(const GGUFFile& f, const std::string& name, int64_t rows, int64_t cols) {
  const GGUFTensorInfo& t = f.require_tensor(name);
  if (t.shape.size() != 2 || t.shape[0] != cols || t.shape[1] != rows)
    throw FileFormatError(strformat("%s: tensor '%s' should have shape [%lld, %lld]", f.path().c_str(),
                                    name.c_str(), static_cast<long long>(cols),
                                    static_cast<long long>(rows)));
  return {t.type, t.data, rows, cols};
}

const float* vector_f32(const GGUFFile& f, const std::string& name, int64_t n) {
  const GGUFTensorInfo& t = f.require_tensor(name);
  if (t.type != GGMLType::F32 || t.shape.size() != 1 || t.shape[0] != n)
    throw FileFormatError(strformat("%s: tensor '%s' should be F32 of shape [%lld]", f.path().c_str(),
                                    name.c_str(), static_cast<long long>(n)));
  return reinterpret_cast<const float*>(t.data);
}

template <class Vector>
void grow(Vector& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

LlamaWeights LlamaWeights::from_gguf(const GGUFFile& f, const ModelConfig& c) {
  LlamaWeights w;
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
  const int64_t kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  w.token_embd = matrix(f, "token_embd.weight", c.vocab_size, c.dim);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = strformat("blk.%d.", l);
    LlamaLayerWeights L;
    L.attn_norm = vector_f32(f, p + "attn_norm.weight", c.dim);
    L.wq = matrix(f, p + "attn_q.weight", q_dim, c.dim);
    L.wk = matrix(f, p + "attn_k.weight", kv_dim, c.dim);
    L.wv = matrix(f, p + "attn_v.weight", kv_dim, c.dim);
    L.wo = matrix(f, p + "attn_output.weight", c.dim, q_dim);
    L.ffn_norm = vector_f32(f, p + "ffn_norm.weight", c.dim);
    L.w_gate = matrix(f, p + "ffn_gate.weight", c.ffn_dim, c.dim);
    L.w_up = matrix(f, p + "ffn_up.weight", c.ffn_dim, c.dim);
    L.w_down = matrix(f, p + "ffn_down.weight", c.dim, c.ffn_dim);
    w.layers.push_back(L);
  }
  w.output_norm = vector_f32(f, "output_norm.weight", c.dim);
  const int64_t head_rows = c.output_token_ids.empty() ? c.vocab_size
                                                       : static_cast<int64_t>(c.output_token_ids.size());
  w.output = f.find_tensor("output.weight") ? matrix(f, "output.weight", head_rows, c.dim)
                                            : w.token_embd;  // tied embeddings
  return w;
}

LlamaModel::LlamaModel(const GGUFFile& file, ModelConfig config)
    : config_(std::move(config)), weights_(LlamaWeights::from_gguf(file, config_)) {}

void LlamaModel::ensure_scratch(int64_t n) {
  const ModelConfig& c = config_;
  grow(x_, n * c.dim);
  grow(h_, n * c.dim);
  grow(q_, n * c.n_heads * c.head_dim);
  grow(k_, n * c.n_kv_heads * c.head_dim);
  grow(v_, n * c.n_kv_heads * c.head_dim);
  grow(attn_, n * c.n_heads * c.head_dim);
  grow(proj_, n * c.dim);
  grow(gate_, n * c.ffn_dim);
  grow(rope_cos_, n * (c.rope_dims / 2));
  grow(rope_sin_, n * (c.rope_dims / 2));
  grow(up_, n * c.ffn_dim);
}

int64_t LlamaModel::weight_bytes() const {
  auto bytes = [](const kernels::WeightMatrix& w) { return w.rows * ggml_row_bytes(w.type, w.cols); };
  const int64_t dim = config_.dim;
  int64_t total = bytes(weights_.output) + dim * 4;
  for (const LlamaLayerWeights& L : weights_.layers)
    total += bytes(L.wq) + bytes(L.wk) + bytes(L.wv) + bytes(L.wo) + bytes(L.w_gate) + bytes(L.w_up) + bytes(L.w_down) +
             2 * dim * 4;
  return total;  // the embedding table is read one row per token, not whole
}

std::unique_ptr<KVPool> LlamaModel::make_kv_pool(int64_t num_blocks, int block_size) {
  return std::make_unique<KVStorage>(config_, num_blocks, block_size);
}

void LlamaModel::forward(const ForwardBatch& b, KVPool& kv_pool, float* logits, ThreadPool& pool, int num_layers,
                         int32_t* argmax) {
  auto* storage = dynamic_cast<KVStorage*>(&kv_pool);
  EXACTLY_CHECK(storage != nullptr, "the CPU model was given a KV pool of another device");
  KVStorage& kv = *storage;
  const ModelConfig& c = config_;
  num_layers = check_forward_batch(b, *this, num_layers);
  const int64_t n = b.num_tokens();
  ensure_scratch(n);

  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const kernels::AttentionBatch attn_batch{b.num_seqs(), b.query_start.data(), b.seq_lens.data(),
                                           b.block_tables.data(), b.max_blocks_per_seq};
  float* x = x_.data();
  kernels::embedding_lookup(weights_.token_embd, b.tokens.data(), n, x);
  kernels::rope_angles(b.positions.data(), n, c.rope_dims, c.rope_freq_base, rope_cos_.data(), rope_sin_.data());

  for (int l = 0; l < num_layers; ++l) {
    const LlamaLayerWeights& L = weights_.layers[static_cast<size_t>(l)];
    // Attention block: x += wo · attention(rope(wq·norm(x)), rope(wk·norm(x)), wv·norm(x))
    kernels::rmsnorm(x, L.attn_norm, n, c.dim, c.rms_eps, h_.data());
    kernels::matmul(L.wq, h_.data(), n, q_.data(), pool);
    kernels::matmul(L.wk, h_.data(), n, k_.data(), pool);
    kernels::matmul(L.wv, h_.data(), n, v_.data(), pool);
    kernels::rope_adjacent_with(q_.data(), n, c.n_heads, c.head_dim, c.rope_dims, rope_cos_.data(), rope_sin_.data());
    kernels::rope_adjacent_with(k_.data(), n, c.n_kv_heads, c.head_dim, c.rope_dims, rope_cos_.data(),
                                rope_sin_.data());
    const kernels::PagedKV cache = kv.layer(l);
    kernels::kv_store(cache, k_.data(), v_.data(), b.slot_mapping.data(), n);
    kernels::attention(cache, attn_batch, q_.data(), c.n_heads, scale, attn_.data(), pool);
    kernels::matmul(L.wo, attn_.data(), n, proj_.data(), pool);
    kernels::add_inplace(x, proj_.data(), n * c.dim);

    // MLP block: x += w_down · (silu(w_gate·norm(x)) * w_up·norm(x))
    kernels::rmsnorm(x, L.ffn_norm, n, c.dim, c.rms_eps, h_.data());
    kernels::matmul(L.w_gate, h_.data(), n, gate_.data(), pool);
    kernels::matmul(L.w_up, h_.data(), n, up_.data(), pool);
    kernels::silu_mul(gate_.data(), up_.data(), n * c.ffn_dim, gate_.data(), pool);
    kernels::matmul(L.w_down, gate_.data(), n, proj_.data(), pool);
    kernels::add_inplace(x, proj_.data(), n * c.dim);
  }

  // Only the rows that need logits go through the final norm and the head.
  const auto n_out = static_cast<int64_t>(b.logits_rows.size());
  if (n_out == 0) return;
  grow(last_, n_out * c.dim);
  for (int64_t i = 0; i < n_out; ++i) {
    const int32_t row = b.logits_rows[static_cast<size_t>(i)];
    kernels::rmsnorm(x + int64_t{row} * c.dim, weights_.output_norm, 1, c.dim, c.rms_eps,
                     last_.data() + i * c.dim);
  }
  if (c.output_token_ids.empty()) {
    kernels::matmul(weights_.output, last_.data(), n_out, logits, pool);
  } else {
    // A head over some tokens: its logits land on their tokens, every other
    // token gets -inf (probability 0), so the row reads like a full one.
    const auto rows = static_cast<int64_t>(c.output_token_ids.size());
    grow(head_, n_out * rows);
    kernels::matmul(weights_.output, last_.data(), n_out, head_.data(), pool);
    pool.parallel_for(n_out, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        float* row = logits + i * c.vocab_size;
        std::fill(row, row + c.vocab_size, -std::numeric_limits<float>::infinity());
        const float* part = head_.data() + i * rows;
        for (int64_t r = 0; r < rows; ++r) row[c.output_token_ids[static_cast<size_t>(r)]] = part[r];
      }
    });
  }
  if (argmax != nullptr)
    pool.parallel_for(n_out, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const float* row = logits + i * c.vocab_size;
        int32_t best = 0;
        for (int32_t v = 1; v < c.vocab_size; ++v)
          if (row[v] > row[best]) best = v;
        argmax[i] = best;
      }
    });
}

}  // namespace exactly
