#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"
#include "core/ggml_types.h"
#include "loader/gguf.h"
#include "model/gemma3_layer.h"
#include "model/rope_scaling.h"

namespace exactly {

namespace {

kernels::WeightMatrix matrix(const GGUFFile& f, const std::string& name, int64_t rows, int64_t cols) {
  const GGUFTensorInfo& t = f.require_tensor(name);
  if (t.shape.size() != 2 || t.shape[0] != cols || t.shape[1] != rows)
    throw FileFormatError(strformat("%s: tensor '%s' should have shape [%lld, %lld]", f.path().c_str(),
                                    name.c_str(), static_cast<long long>(cols),
                                    static_cast<long long>(rows)));
  if (cols % 32 != 0)
    throw FileFormatError(strformat("%s: tensor '%s' has %lld columns; the CPU kernels need a multiple of 32",
                                    f.path().c_str(), name.c_str(), static_cast<long long>(cols)));
  return {t.type, t.data, rows, cols};
}

// A [n, rows, cols] tensor (GGUF shape [cols, rows, n]) as n matrices.
std::vector<kernels::WeightMatrix> matrices(const GGUFFile& f, const std::string& name, int64_t n, int64_t rows,
                                            int64_t cols) {
  const GGUFTensorInfo& t = f.require_tensor(name);
  if (t.shape.size() != 3 || t.shape[0] != cols || t.shape[1] != rows || t.shape[2] != n)
    throw FileFormatError(strformat("%s: tensor '%s' should have shape [%lld, %lld, %lld]", f.path().c_str(),
                                    name.c_str(), static_cast<long long>(cols), static_cast<long long>(rows),
                                    static_cast<long long>(n)));
  if (cols % 32 != 0)
    throw FileFormatError(strformat("%s: tensor '%s' has %lld columns; the CPU kernels need a multiple of 32",
                                    f.path().c_str(), name.c_str(), static_cast<long long>(cols)));
  std::vector<kernels::WeightMatrix> out;
  const int64_t stride = rows * ggml_row_bytes(t.type, cols);
  for (int64_t e = 0; e < n; ++e) out.push_back({t.type, static_cast<const uint8_t*>(t.data) + e * stride, rows, cols});
  return out;
}

const float* vector_f32(const GGUFFile& f, const std::string& name, int64_t n) {
  const GGUFTensorInfo& t = f.require_tensor(name);
  if (t.type != GGMLType::F32 || t.shape.size() != 1 || t.shape[0] != n)
    throw FileFormatError(strformat("%s: tensor '%s' should be F32 of shape [%lld]", f.path().c_str(),
                                    name.c_str(), static_cast<long long>(n)));
  return reinterpret_cast<const float*>(t.data);
}

// An F32 [rows, cols] tensor (GGUF shape [cols, rows]), such as one bias row per expert.
const float* rows_f32(const GGUFFile& f, const std::string& name, int64_t rows, int64_t cols) {
  const GGUFTensorInfo& t = f.require_tensor(name);
  if (t.type != GGMLType::F32 || t.shape.size() != 2 || t.shape[0] != cols || t.shape[1] != rows)
    throw FileFormatError(strformat("%s: tensor '%s' should be F32 of shape [%lld, %lld]", f.path().c_str(),
                                    name.c_str(), static_cast<long long>(cols), static_cast<long long>(rows)));
  return reinterpret_cast<const float*>(t.data);
}

MoeWeights experts(const GGUFFile& f, const std::string& p, const ModelConfig& c) {
  MoeWeights m;
  const int64_t ffn = c.expert_ffn_dim;
  m.router = matrix(f, p + "ffn_gate_inp.weight", c.n_experts, c.dim);
  const auto gate = matrices(f, p + "ffn_gate_exps.weight", c.n_experts, ffn, c.dim);
  const auto up = matrices(f, p + "ffn_up_exps.weight", c.n_experts, ffn, c.dim);
  const auto down = matrices(f, p + "ffn_down_exps.weight", c.n_experts, c.dim, ffn);
  for (int32_t e = 0; e < c.n_experts; ++e) m.experts.push_back({gate[e], up[e], down[e]});
  if (c.expert_biases) {
    m.router_bias = vector_f32(f, p + "ffn_gate_inp.bias", c.n_experts);
    const float* gate_bias = rows_f32(f, p + "ffn_gate_exps.bias", c.n_experts, ffn);
    const float* up_bias = rows_f32(f, p + "ffn_up_exps.bias", c.n_experts, ffn);
    const float* down_bias = rows_f32(f, p + "ffn_down_exps.bias", c.n_experts, c.dim);
    for (int32_t e = 0; e < c.n_experts; ++e) {
      ExpertWeights& x = m.experts[static_cast<size_t>(e)];
      x.gate_bias = gate_bias + e * ffn, x.up_bias = up_bias + e * ffn, x.down_bias = down_bias + e * c.dim;
    }
  }
  return m;
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
    if (c.architecture == "phi3") {  // q | k | v in one tensor
      const kernels::WeightMatrix qkv = matrix(f, p + "attn_qkv.weight", q_dim + 2 * kv_dim, c.dim);
      L.wq = kernels::row_slice(qkv, 0, q_dim);
      L.wk = kernels::row_slice(qkv, q_dim, kv_dim);
      L.wv = kernels::row_slice(qkv, q_dim + kv_dim, kv_dim);
    } else {
      L.wq = matrix(f, p + "attn_q.weight", q_dim, c.dim);
      L.wk = matrix(f, p + "attn_k.weight", kv_dim, c.dim);
      L.wv = matrix(f, p + "attn_v.weight", kv_dim, c.dim);
    }
    L.wo = matrix(f, p + "attn_output.weight", c.dim, q_dim);
    if (c.attention_bias) {
      L.q_bias = vector_f32(f, p + "attn_q.bias", q_dim);
      L.k_bias = vector_f32(f, p + "attn_k.bias", kv_dim);
      L.v_bias = vector_f32(f, p + "attn_v.bias", kv_dim);
      // gpt-oss's files always have o's bias; elsewhere the file says.
      if (c.architecture == "gpt-oss" || f.find_tensor(p + "attn_output.bias"))
        L.o_bias = vector_f32(f, p + "attn_output.bias", c.dim);
    }
    if (c.attention_sinks) L.sinks = vector_f32(f, p + "attn_sinks.weight", c.n_heads);
    if (c.qk_norm) {
      L.q_norm = vector_f32(f, p + "attn_q_norm.weight", c.head_dim);
      L.k_norm = vector_f32(f, p + "attn_k_norm.weight", c.head_dim);
    }
    // gpt-oss's files name the norm before the MLP post_attention_norm.
    L.ffn_norm = vector_f32(f, p + (c.architecture == "gpt-oss" ? "post_attention_norm.weight" : "ffn_norm.weight"),
                            c.dim);
    if (c.sandwich_norms) {
      L.post_attn_norm = vector_f32(f, p + "post_attention_norm.weight", c.dim);
      L.post_ffn_norm = vector_f32(f, p + "post_ffw_norm.weight", c.dim);
    }
    if (c.n_experts > 0) {
      L.moe = experts(f, p, c);
    } else if (c.architecture == "phi3") {  // gate | up in one tensor, named ffn_up
      const kernels::WeightMatrix gate_up = matrix(f, p + "ffn_up.weight", 2 * int64_t{c.ffn_dim}, c.dim);
      L.w_gate = kernels::row_slice(gate_up, 0, c.ffn_dim);
      L.w_up = kernels::row_slice(gate_up, c.ffn_dim, c.ffn_dim);
      L.w_down = matrix(f, p + "ffn_down.weight", c.dim, c.ffn_dim);
    } else {
      L.w_gate = matrix(f, p + "ffn_gate.weight", c.ffn_dim, c.dim);
      L.w_up = matrix(f, p + "ffn_up.weight", c.ffn_dim, c.dim);
      L.w_down = matrix(f, p + "ffn_down.weight", c.dim, c.ffn_dim);
    }
    w.layers.push_back(L);
  }
  w.output_norm = vector_f32(f, "output_norm.weight", c.dim);
  if (c.rope_freq_factors) {
    w.rope_factors = vector_f32(f, "rope_freqs.weight", c.rope_dims / 2);
    for (int i = 0; i < c.rope_dims / 2; ++i)
      if (!(w.rope_factors[i] > 0) || !std::isfinite(w.rope_factors[i]))
        throw FileFormatError(strformat("%s: tensor 'rope_freqs.weight' has %g at %d; factors must be positive",
                                        f.path().c_str(), static_cast<double>(w.rope_factors[i]), i));
  }
  const int64_t head_rows = c.output_token_ids.empty() ? c.vocab_size
                                                       : static_cast<int64_t>(c.output_token_ids.size());
  w.output = f.find_tensor("output.weight") ? matrix(f, "output.weight", head_rows, c.dim)
                                            : w.token_embd;  // tied embeddings
  return w;
}

LlamaModel::LlamaModel(const GGUFFile& file, ModelConfig config)
    : config_(std::move(config)), weights_(LlamaWeights::from_gguf(file, config_)) {
  init_rope_factors();
}

// The global layers' frequency divisors (model/rope_scaling.h).
void LlamaModel::init_rope_factors() {
  scaled_rope_factors_ = global_rope_divisors(config_, weights_.rope_factors);
  global_rope_factors_ = scaled_rope_factors_.empty() ? nullptr : scaled_rope_factors_.data();
}

namespace {

kernels::WeightMatrix hf_matrix(const SafetensorsTensor& t) {
  if (t.shape[1] % 32 != 0)
    throw FileFormatError(strformat("tensor '%s' has %lld columns; the CPU kernels need a multiple of 32",
                                    t.name.c_str(), static_cast<long long>(t.shape[1])));
  const GGMLType type = t.dtype == SafetensorsDType::F32   ? GGMLType::F32
                        : t.dtype == SafetensorsDType::F16 ? GGMLType::F16
                                                           : GGMLType::BF16;  // HfWeights::open allows these three
  return {type, t.data, t.shape[0], t.shape[1]};
}

}  // namespace

LlamaModel::LlamaModel(std::unique_ptr<HfWeights> hf, ModelConfig config)
    : config_(std::move(config)), hf_(std::move(hf)) {
  auto f32 = [&](const SafetensorsTensor* t) -> const float* {
    if (t == nullptr) return nullptr;
    append_as_f32(*t, hf_vectors_.emplace_back());
    return hf_vectors_.back().data();
  };
  const float norm_offset = hf_norm_offset(config_);  // added in fp32
  auto norm = [&](const SafetensorsTensor* t) -> const float* {
    const float* w = f32(t);
    if (w != nullptr && norm_offset != 0.0f)
      for (float& e : hf_vectors_.back()) e += norm_offset;
    return w;
  };
  weights_.token_embd = hf_matrix(*hf_->token_embd);
  for (const HfLayerWeights& h : hf_->layers) {
    LlamaLayerWeights L;
    L.attn_norm = norm(h.attn_norm);
    L.wq = hf_matrix(*h.wq);
    L.wk = hf_matrix(*h.wk);
    L.wv = hf_matrix(*h.wv);
    L.q_bias = f32(h.q_bias);
    L.k_bias = f32(h.k_bias);
    L.v_bias = f32(h.v_bias);
    L.q_norm = norm(h.q_norm);
    L.k_norm = norm(h.k_norm);
    L.wo = hf_matrix(*h.wo);
    L.o_bias = f32(h.o_bias);
    L.sinks = f32(h.sinks);
    L.ffn_norm = norm(h.ffn_norm);
    L.post_attn_norm = norm(h.post_attn_norm);
    L.post_ffn_norm = norm(h.post_ffn_norm);
    if (config_.n_experts > 0) {
      L.moe.router = hf_matrix(*h.router);
      L.moe.router_bias = f32(h.router_bias);
      if (config_.architecture == "gpt-oss") L.moe.experts = convert_fused_experts(h.fused, config_, hf_experts_);
      for (const auto& [gate, up, down] : h.experts)
        L.moe.experts.push_back({hf_matrix(*gate), hf_matrix(*up), hf_matrix(*down)});
    } else {
      L.w_gate = hf_matrix(*h.w_gate);
      L.w_up = hf_matrix(*h.w_up);
      L.w_down = hf_matrix(*h.w_down);
    }
    weights_.layers.push_back(L);
  }
  weights_.output_norm = norm(hf_->output_norm);
  weights_.output = hf_matrix(*hf_->output);
  init_rope_factors();
}

void LlamaModel::ensure_scratch(int64_t n) {
  const ModelConfig& c = config_;
  grow(x_, n * c.dim);
  grow(h_, n * c.dim);
  grow(q_, n * c.n_heads * c.head_dim);
  grow(k_, n * c.n_kv_heads * c.head_dim);
  grow(v_, n * c.n_kv_heads * c.head_dim);
  grow(attn_, n * c.n_heads * c.head_dim);
  grow(proj_, n * c.dim);
  const int64_t dense_ffn = c.n_experts > 0 ? 0 : c.ffn_dim;  // experts have scratch of their own
  grow(gate_, n * dense_ffn);
  grow(rope_cos_, n * (c.rope_dims / 2));
  grow(rope_sin_, n * (c.rope_dims / 2));
  if (c.rope_local_freq_base > 0) {
    grow(local_cos_, n * (c.rope_dims / 2));
    grow(local_sin_, n * (c.rope_dims / 2));
  }
  grow(up_, n * dense_ffn);
}

int64_t LlamaModel::weight_bytes() const {
  auto bytes = [](const kernels::WeightMatrix& w) { return w.rows * ggml_row_bytes(w.type, w.cols); };
  const int64_t dim = config_.dim;
  int64_t total = bytes(weights_.output) + dim * 4;
  for (const LlamaLayerWeights& L : weights_.layers) {
    total += bytes(L.wq) + bytes(L.wk) + bytes(L.wv) + bytes(L.wo) + (config_.sandwich_norms ? 4 : 2) * dim * 4;
    if (L.moe.experts.empty()) total += bytes(L.w_gate) + bytes(L.w_up) + bytes(L.w_down);
    total += L.moe.experts.empty() ? 0 : bytes(L.moe.router);
    for (const ExpertWeights& e : L.moe.experts) total += bytes(e.gate) + bytes(e.up) + bytes(e.down);
  }
  return total;  // the embedding table is read one row per token, not whole
}

std::unique_ptr<KVPool> LlamaModel::make_kv_pool(int64_t num_blocks, int block_size) {
  return std::make_unique<KVStorage>(config_, num_blocks, block_size);
}

void LlamaModel::forward(const ForwardBatch& batch, KVPool& kv_pool, float* logits, ThreadPool& pool, int num_layers,
                         int32_t* argmax) {
  auto* storage = dynamic_cast<KVStorage*>(&kv_pool);
  EXACTLY_CHECK(storage != nullptr, "the CPU model was given a KV pool of another device");
  KVStorage& kv = *storage;
  const ModelConfig& c = config_;
  num_layers = check_forward_batch(batch, *this, num_layers);
  const ModelInput& b = batch.input;  // a CPU model reads no row jobs
  const int64_t n = b.num_tokens();
  ensure_scratch(n);

  const kernels::AttentionBatch attn_batch{b.num_seqs(), b.query_start.data(), b.seq_lens.data(),
                                           b.block_tables.data(), b.max_blocks_per_seq};
  float* x = x_.data();
  kernels::embedding_lookup(weights_.token_embd, b.tokens.data(), n, x);
  if (c.embedding_scale > 0)
    for (int64_t i = 0; i < n * c.dim; ++i) x[i] *= c.embedding_scale;
  kernels::rope_angles(b.positions.data(), n, c.rope_dims, c.rope_freq_base, rope_cos_.data(), rope_sin_.data(),
                       global_rope_factors_);
  if (const float m = global_rope_magnitude(c); m != 1.0f)
    for (int64_t i = 0; i < n * (c.rope_dims / 2); ++i) rope_cos_[i] *= m, rope_sin_[i] *= m;
  if (c.rope_local_freq_base > 0)  // the sliding layers' own angles, unscaled
    kernels::rope_angles(b.positions.data(), n, c.rope_dims, c.rope_local_freq_base, local_cos_.data(),
                         local_sin_.data());
  LayerBuffers global{h_.data(),    q_.data(),    k_.data(),  v_.data(),        attn_.data(),
                      proj_.data(), gate_.data(), up_.data(), rope_cos_.data(), rope_sin_.data(), &moe_};
  if (shard_.size > 1) global.shard = &shard_;
  LayerBuffers local = global;
  if (c.rope_local_freq_base > 0) local.rope_cos = local_cos_.data(), local.rope_sin = local_sin_.data();
  LayerBuffers unrotated = global;  // SmolLM3's NoPE layers
  unrotated.rope_cos = unrotated.rope_sin = nullptr;
  const auto layer_fn = c.sandwich_norms ? gemma3_layer : llama_layer;
  for (int l = 0; l < num_layers; ++l) {
    const int32_t window = c.window_of(l);
    const LayerKV layer_kv{kv.layer(l), b.slot_mapping.data(), attn_batch, window};
    const LayerBuffers& buffers = c.skips_rope(l) ? unrotated : window > 0 ? local : global;
    layer_fn(weights_.layers[static_cast<size_t>(l)], c, x, n, buffers, layer_kv, pool);
  }

  // Hidden states asked for are normed on their own, apart from the logits
  // rows, by the same kernel: the logits keep their bits.
  const auto n_hidden = static_cast<int64_t>(b.hidden_rows.size());
  grow(hidden_out_, n_hidden * c.dim);
  hidden_size_ = static_cast<size_t>(n_hidden * c.dim);
  for (int64_t i = 0; i < n_hidden; ++i)
    kernels::rmsnorm(x + int64_t{b.hidden_rows[static_cast<size_t>(i)]} * c.dim, weights_.output_norm, 1, c.dim,
                     c.rms_eps, hidden_out_.data() + i * c.dim);

  // Only the rows that need logits go through the final norm and the head.
  const auto n_out = static_cast<int64_t>(b.logits_rows.size());
  if (n_out == 0) return;
  grow(last_, n_out * c.dim);
  for (int64_t i = 0; i < n_out; ++i) {
    const int32_t row = b.logits_rows[static_cast<size_t>(i)];
    kernels::rmsnorm(x + int64_t{row} * c.dim, weights_.output_norm, 1, c.dim, c.rms_eps,
                     last_.data() + i * c.dim);
  }
  if (shard_.size > 1) {  // this rank's rows of the head into its columns of every logits row
    const int64_t rows = vocab_end_ - vocab_begin_;
    grow(head_, n_out * rows);
    kernels::matmul(weights_.output, last_.data(), n_out, head_.data(), pool);
    for (int64_t i = 0; i < n_out; ++i)
      std::copy_n(head_.data() + i * rows, rows, logits + i * c.vocab_size + vocab_begin_);
    return;
  }
  output_logits(weights_.output, c.output_token_ids, c.vocab_size, last_.data(), n_out, logits, argmax, head_, pool,
                c.final_logit_softcap);
}

}  // namespace exactly
