#include "model/cuda/llama_cuda_layers.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cuda/moe.h"
#include "model/cuda/cuda_attention_plan.h"
#include "model/cuda/kv_pool_cuda.h"
#include "model/cuda/weight_layout.h"
#include "model/rope_scaling.h"

namespace exactly {

namespace kc = kernels::cuda;

CudaLlamaLayers::CudaLlamaLayers(const ModelConfig& config, bool deterministic)
    : config_(config), rope_layout_(config.rope_layout == RopeLayout::kHalfSplit ? kc::RopeLayout::kHalfSplit
                                                                                 : kc::RopeLayout::kAdjacentPairs),
      gemm_(std::make_unique<kc::Gemm>(deterministic ? kc::GemmOrder::kCanonical : kc::GemmOrder::kFastest)),
      scale_(config.attention_scale > 0 ? config.attention_scale
                                         : 1.0f / std::sqrt(static_cast<float>(config.head_dim))) {
  set_rope_scaling(nullptr);
}

void CudaLlamaLayers::set_rope_scaling(const float* file_factors) {
  const std::vector<float> divisors = global_rope_divisors(config_, file_factors);
  rope_magnitude_ = global_rope_magnitude(config_);
  rope_divisors_ = kc::DeviceBuffer(divisors.size() * sizeof(float), "RoPE divisors");
  if (!divisors.empty())
    kc::check_cuda(cudaMemcpy(rope_divisors_.get(), divisors.data(), rope_divisors_.bytes(), cudaMemcpyHostToDevice),
                   "uploading RoPE divisors");
}

uint8_t* CudaLlamaLayers::allocate_weights(const WeightLayout& layout) {
  weights_ = kc::DeviceBuffer(layout.total, "the weights");
  // A pass reads every weight once, but of the embedding table (when the head
  // has its own) only one row per token.
  const bool tied = layout.output == layout.token_embd;
  weight_bytes_ = static_cast<int64_t>(layout.total) - (tied ? 0 : int64_t{config_.vocab_size} * config_.dim * 2);
  auto* base = weights_.as<uint8_t>();
  auto f32 = [&](size_t offset) { return reinterpret_cast<float*>(base + offset); };
  auto optional_f32 = [&](size_t offset) { return offset == SIZE_MAX ? nullptr : f32(offset); };
  const bool borrowed = layout.token_embd == SIZE_MAX;  // a draft head's: borrow_vocab_tables
  token_embd_ = borrowed ? nullptr : base + layout.token_embd;
  output_ = borrowed ? nullptr : base + layout.output;
  fc_ = layout.fc == SIZE_MAX ? nullptr : base + layout.fc;
  output_norm_ = f32(layout.output_norm);
  layers_.clear();
  auto optional = [&](size_t offset) -> void* { return offset == SIZE_MAX ? nullptr : base + offset; };
  for (const auto& o : layout.layers)
    layers_.push_back({f32(o.attn_norm), base + o.wqkv, optional_f32(o.qkv_bias), optional_f32(o.q_norm),
                       optional_f32(o.k_norm), base + o.wo, f32(o.ffn_norm), optional(o.w_gate_up),
                       optional(o.w_down), optional(o.router), optional(o.experts_gate_up),
                       optional(o.experts_down), optional_f32(o.post_attn_norm), optional_f32(o.post_ffn_norm)});
  return base;
}

void CudaLlamaLayers::borrow_vocab_tables(const CudaLlamaLayers& target) {
  token_embd_ = target.token_embd_;
  output_ = target.output_;
  weight_bytes_ += int64_t{config_.vocab_size} * config_.dim * 2;  // each pass reads the head
}

void CudaLlamaLayers::allocate_activations(int64_t tokens, int32_t head_rows) {
  const ModelConfig& c = config_;
  const auto T = static_cast<size_t>(tokens);
  x_ = kc::DeviceBuffer(T * static_cast<size_t>(c.dim) * 4, "activations");
  h_ = kc::DeviceBuffer(T * static_cast<size_t>(c.dim) * 2, "activations");
  qkv_ = kc::DeviceBuffer(T * static_cast<size_t>(qkv_rows(c)) * 2, "activations");
  q_ = kc::DeviceBuffer(T * static_cast<size_t>(q_width(c)) * 2, "activations");
  attn_ = kc::DeviceBuffer(T * static_cast<size_t>(q_width(c)) * 2, "activations");
  // With experts, gate_up and act hold a row per (token, chosen expert).
  const size_t mlp_rows = c.n_experts > 0 ? T * static_cast<size_t>(c.n_experts_used) : T;
  const size_t mlp_width = static_cast<size_t>(c.n_experts > 0 ? c.expert_ffn_dim : c.ffn_dim);
  gate_up_ = kc::DeviceBuffer(mlp_rows * 2 * mlp_width * 2, "activations");
  act_ = kc::DeviceBuffer(mlp_rows * mlp_width * 2, "activations");
  if (c.n_experts > 0) {
    router_logits_ = kc::DeviceBuffer(T * static_cast<size_t>(c.n_experts) * 4, "router logits");
    routes_ = kc::DeviceBuffer(kc::moe_routes_bytes(tokens, c.n_experts_used, c.n_experts), "expert routes");
    expert_out_ = kc::DeviceBuffer(mlp_rows * static_cast<size_t>(c.dim) * 4, "activations");
  }
  angles_ = kc::DeviceBuffer(T * static_cast<size_t>(c.rope_dims / 2) * 8, "rotary angles");
  if (c.rope_local_freq_base > 0)
    local_angles_ = kc::DeviceBuffer(T * static_cast<size_t>(c.rope_dims / 2) * 8, "rotary angles");
  if (!c.layer_skips_rope.empty()) {  // cos 1, sin 0: rope_and_store's rotation then leaves q and k as they are
    const std::vector<float2> identity(T * static_cast<size_t>(c.rope_dims / 2), make_float2(1.0f, 0.0f));
    unrotated_angles_ = kc::DeviceBuffer(identity.size() * sizeof(float2), "rotary angles");
    kc::check_cuda(cudaMemcpy(unrotated_angles_.get(), identity.data(), unrotated_angles_.bytes(),
                              cudaMemcpyHostToDevice),
                   "identity rotary angles");
  }
  if (c.sandwich_norms) proj_ = kc::DeviceBuffer(T * static_cast<size_t>(c.dim) * 4, "activations");
  last_ = kc::DeviceBuffer(static_cast<size_t>(head_rows) * static_cast<size_t>(c.dim) * 2, "activations");
  if (fc_ != nullptr) beside_ = kc::DeviceBuffer(T * 2 * static_cast<size_t>(c.dim) * 2, "activations");
}

size_t CudaLlamaLayers::activation_memory() const {
  return x_.bytes() + h_.bytes() + qkv_.bytes() + q_.bytes() + attn_.bytes() + gate_up_.bytes() + act_.bytes() +
         last_.bytes() + beside_.bytes() + router_logits_.bytes() + routes_.bytes() + expert_out_.bytes() +
         angles_.bytes() + local_angles_.bytes() + unrotated_angles_.bytes() + proj_.bytes() +
         gemm_->workspace_bytes();
}

void CudaLlamaLayers::prepare_products(int64_t max_rows, int32_t head_rows, cudaStream_t stream) {
  const ModelConfig& c = config_;
  if (layers_.empty()) return;
  const Layer& L = layers_.front();  // every layer's products have its shapes
  for (int64_t n = 1;; n = std::min(2 * n, max_rows)) {
    if (fc_ != nullptr) gemm_->prepare(beside_.get(), fc_, n, c.dim, 2 * int64_t{c.dim}, kc::GemmOut::f32, false, stream);
    gemm_->prepare(h_.get(), L.wqkv, n, qkv_rows(c), c.dim, kc::GemmOut::bf16, false, stream);
    const bool adds = !c.sandwich_norms;  // add_output: into the stream, or into proj_ before a post-norm
    gemm_->prepare(attn_.get(), L.wo, n, c.dim, q_width(c), kc::GemmOut::f32, adds, stream);
    if (L.router != nullptr) {
      gemm_->prepare(h_.get(), L.router, n, c.n_experts, c.dim, kc::GemmOut::f32, false, stream);
    } else {
      gemm_->prepare(h_.get(), L.w_gate_up, n, 2 * int64_t{c.ffn_dim}, c.dim, kc::GemmOut::bf16, false, stream);
      gemm_->prepare(act_.get(), L.w_down, n, c.dim, c.ffn_dim, kc::GemmOut::f32, adds, stream);
    }
    if (n <= head_rows) gemm_->prepare(last_.get(), output_, n, c.vocab_size, c.dim, kc::GemmOut::f32, false, stream);
    if (n >= max_rows) break;
  }
  kc::check_cuda(cudaStreamSynchronize(stream), "planning the products");
}

// The decoder layers over the step's tokens, all on the stream: x is the
// residual stream, h a norm's output.
void CudaLlamaLayers::run_layers(const CudaStepTokens& step, CudaKVPool& kv, const CudaAttentionPlan& attention,
                                 int num_layers, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const int64_t n = step.n;
  embed(step, stream);
  kc::rope_angles(step.positions, n, c.rope_dims, c.rope_freq_base, angles_.get(), stream,  // once for all layers
                  rope_divisors_.as<float>(), rope_magnitude_);
  if (local_angles_.get() != nullptr)  // the sliding layers' own base, unscaled
    kc::rope_angles(step.positions, n, c.rope_dims, c.rope_local_freq_base, local_angles_.get(), stream);
  for (int l = 0; l < num_layers; ++l) {
    const Layer& L = layers_[static_cast<size_t>(l)];
    const kc::PagedKVDevice cache = kv.layer(l);
    const bool local = local_angles_.get() != nullptr && c.window_of(l) > 0;
    const void* angles = c.skips_rope(l) ? unrotated_angles_.get() : local ? local_angles_.get() : angles_.get();
    // x = x + attention(norm(x))
    norm(L.attn_norm, n, stream);
    add_attention(L, cache, step, attention, angles, stream);
    // x = x + mlp(norm(x))
    norm(L.ffn_norm, n, stream);
    if (L.router != nullptr)
      add_experts(L, n, stream);
    else
      add_mlp(L, n, stream);
  }
}

void CudaLlamaLayers::embed(const CudaStepTokens& step, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const int64_t n = step.n;
  if (fc_ == nullptr) {  // x [n, dim] = embed(tokens)
    kc::embedding_lookup(token_embd_, step.tokens, n, c.dim, c.vocab_size, x_.as<float>(), stream,
                         c.embedding_scale > 0 ? c.embedding_scale : 1.0f);
    return;
  }
  // x [n, dim] = [embed(tokens) | hidden_in] · fcᵀ
  kc::embed_beside_bf16(token_embd_, step.tokens, step.hidden_in, n, c.dim, c.vocab_size, beside_.get(), stream);
  gemm_->run(beside_.get(), fc_, x_.as<float>(), n, c.dim, 2 * int64_t{c.dim}, kc::GemmOut::f32, false, stream);
}

// h [n, dim] bf16 = rmsnorm(x [n, dim] fp32) * weight [dim]
void CudaLlamaLayers::norm(const float* weight, int64_t n, cudaStream_t stream) {
  const ModelConfig& c = config_;
  kc::rmsnorm_bf16(x_.as<float>(), weight, nullptr, n, c.dim, c.rms_eps, h_.get(), stream);
}

// x += wo · attention(rope(wq·h), rope(wk·h), wv·h), the keys and values of
// the step's tokens stored in `cache` on the way.
void CudaLlamaLayers::add_attention(const Layer& L, const kc::PagedKVDevice& cache, const CudaStepTokens& step,
                                    const CudaAttentionPlan& attention, const void* angles, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const int64_t n = step.n;
  // qkv [n, (n_heads + 2 n_kv_heads) head_dim] = h · wqkvᵀ
  gemm_->run(h_.get(), L.wqkv, qkv_.get(), n, qkv_rows(c), c.dim, kc::GemmOut::bf16, false, stream);
  const float* rope_bias = L.qkv_bias;
  if (L.q_norm != nullptr) {  // the bias goes in with the norm
    kc::head_rmsnorm({qkv_.get(), L.qkv_bias, L.q_norm, L.k_norm, n, c.n_heads, c.n_kv_heads, c.head_dim, c.rms_eps},
                     stream);
    rope_bias = nullptr;
  }
  // q [n, n_heads head_dim] = rope(q); the cache takes rope(k) and v at the tokens' slots
  kc::RopeStoreArgs rope{qkv_.get(),       rope_bias,    step.positions, step.slots,   n, c.n_heads, c.rope_dims,
                         c.rope_freq_base, rope_layout_, q_.get(),       angles};
  kc::rope_and_store(rope, cache, stream);
  // attn [n, n_heads head_dim] = attention(q, cache)
  attention.run(cache, q_.get(), c.n_heads, scale_, attn_.get(), stream);
  // x [n, dim] += attn · woᵀ
  add_output(attn_.get(), L.wo, n, q_width(c), L.post_attn_norm, stream);
}

void CudaLlamaLayers::add_output(const void* in, const void* w, int64_t n, int64_t k, const float* post_norm,
                                 cudaStream_t stream) {
  const ModelConfig& c = config_;
  if (post_norm == nullptr) {  // the product adds into the stream itself
    gemm_->run(in, w, x_.as<float>(), n, c.dim, k, kc::GemmOut::f32, true, stream);
    return;
  }
  gemm_->run(in, w, proj_.as<float>(), n, c.dim, k, kc::GemmOut::f32, false, stream);
  kc::add_rmsnorm_f32(proj_.as<float>(), post_norm, n, c.dim, c.rms_eps, x_.as<float>(), stream);
}

// x += w_down · (silu(w_gate·h) * w_up·h)
void CudaLlamaLayers::add_mlp(const Layer& L, int64_t n, cudaStream_t stream) {
  const ModelConfig& c = config_;
  // gate_up [n, 2 ffn_dim] = h · w_gate_upᵀ
  gemm_->run(h_.get(), L.w_gate_up, gate_up_.get(), n, 2 * int64_t{c.ffn_dim}, c.dim, kc::GemmOut::bf16, false, stream);
  // act [n, ffn_dim] = silu(gate) * up, or GELU's
  kc::gated_activation(gate_up_.get(), n, c.ffn_dim, act_.get(),
                       c.activation == MlpActivation::kGeluTanh ? kc::GateActivation::kGeluTanh
                                                                : kc::GateActivation::kSilu,
                       stream);
  // x [n, dim] += act · w_downᵀ
  add_output(act_.get(), L.w_down, n, c.ffn_dim, L.post_ffn_norm, stream);
}

// x += sum over each token's experts e of weight_e * w_down_e · (silu(w_gate_e·h) * w_up_e·h)
void CudaLlamaLayers::add_experts(const Layer& L, int64_t n, cudaStream_t stream) {
  const ModelConfig& c = config_;
  const int k = c.n_experts_used;
  const int64_t ffn = c.expert_ffn_dim;
  // logits [n, n_experts] = h · routerᵀ; each token's k experts and weights, and the groups
  gemm_->run(h_.get(), L.router, router_logits_.get(), n, c.n_experts, c.dim, kc::GemmOut::f32, false, stream);
  const kc::MoeRoutes routes = kc::moe_routes_at(routes_.get(), n, k, c.n_experts);
  kc::moe_route(router_logits_.as<float>(), n, c.n_experts, k, routes, stream);
  // gate_up [n k, 2 ffn] = h[token of row] · w_gate_up[expert of row]ᵀ
  kc::moe_products({h_.get(), true, L.experts_gate_up, gate_up_.get(), kc::GemmOut::bf16, n, k, c.n_experts, 2 * ffn,
                    c.dim},
                   routes, stream);
  kc::swiglu(gate_up_.get(), n * k, c.expert_ffn_dim, act_.get(), stream);  // act [n k, ffn]
  // out [n k, dim] = act · w_down[expert of row]ᵀ; x [n, dim] += each token's rows, weighted
  kc::moe_products({act_.get(), false, L.experts_down, expert_out_.get(), kc::GemmOut::f32, n, k, c.n_experts, c.dim,
                    ffn},
                   routes, stream);
  kc::moe_combine(expert_out_.as<float>(), routes, n, k, c.dim, x_.as<float>(), stream);
}

void CudaLlamaLayers::final_norm_and_head(const int32_t* rows, int64_t n_rows, float* logits, cudaStream_t stream) {
  const ModelConfig& c = config_;
  // logits [n_rows, vocab] = norm(x[rows]) · outputᵀ
  final_norm(rows, n_rows, last_.get(), stream);
  gemm_->run(last_.get(), output_, logits, n_rows, c.vocab_size, c.dim, kc::GemmOut::f32, false, stream);
  if (c.final_logit_softcap > 0) kc::softcap_f32(logits, n_rows * c.vocab_size, c.final_logit_softcap, stream);
}

// out [n_rows, dim] bf16 = norm(x[rows])
void CudaLlamaLayers::final_norm(const int32_t* rows, int64_t n_rows, void* out, cudaStream_t stream) {
  kc::rmsnorm_bf16(x_.as<float>(), output_norm_, rows, n_rows, config_.dim, config_.rms_eps, out, stream);
}

}  // namespace exactly
