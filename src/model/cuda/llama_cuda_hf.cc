// CudaLlamaModel from a Hugging Face safetensors checkpoint: the tensors are
// checked on the host (model/hf_weights.h), converted to bf16 matrices and
// f32 vectors, and uploaded into the layout every loader shares.
#include "model/cuda/llama_cuda.h"

#include <initializer_list>
#include <vector>

#include "model/cuda/llama_cuda_layers.h"
#include "model/cuda/weight_layout.h"
#include "model/hf_weights.h"

namespace exactly {

namespace kc = kernels::cuda;

std::unique_ptr<CudaLlamaModel> CudaLlamaModel::from_hf(const std::string& dir, ModelConfig config,
                                                        const CudaModelOptions& options) {
  // Every tensor is checked before the GPU is touched: a bad checkpoint is a
  // FileFormatError on any machine.
  const HfWeights w = HfWeights::open(dir, config);
  const bool tied = w.tied(), bias = w.qkv_bias();
  // Hugging Face q/k rows are in the original (half-split) rotary layout; they
  // are uploaded as stored and rotated accordingly.
  config.rope_layout = RopeLayout::kHalfSplit;
  std::unique_ptr<CudaLlamaModel> m(new CudaLlamaModel(std::move(config), options));
  const ModelConfig& c = m->config_;
  const WeightLayout layout(c, tied, bias);
  uint8_t* base = m->layers_->allocate_weights(layout);
  auto upload = [&](size_t offset, const void* src, size_t bytes) {
    kc::check_cuda(cudaMemcpy(base + offset, src, bytes, cudaMemcpyHostToDevice), "uploading weights");
  };
  std::vector<uint16_t> matrix;  // bf16, the rows of one fused matrix
  std::vector<float> vector;
  auto put_matrix = [&](size_t offset, std::initializer_list<const SafetensorsTensor*> parts) {
    matrix.clear();
    for (const SafetensorsTensor* part : parts) append_as_bf16(*part, matrix);
    upload(offset, matrix.data(), matrix.size() * 2);
  };
  auto put_vector = [&](size_t offset, std::initializer_list<const SafetensorsTensor*> parts) {
    vector.clear();
    for (const SafetensorsTensor* part : parts) append_as_f32(*part, vector);
    upload(offset, vector.data(), vector.size() * 4);
  };
  const float norm_offset = hf_norm_offset(c);
  auto put_norm = [&](size_t offset, const SafetensorsTensor* t) {
    vector.clear();
    append_as_f32(*t, vector);
    for (float& e : vector) e += norm_offset;
    upload(offset, vector.data(), vector.size() * 4);
  };
  put_matrix(layout.token_embd, {w.token_embd});
  if (!tied) put_matrix(layout.output, {w.output});
  put_norm(layout.output_norm, w.output_norm);
  for (int l = 0; l < c.n_layers; ++l) {
    const HfLayerWeights& L = w.layers[static_cast<size_t>(l)];
    const WeightLayout::LayerOffsets& o = layout.layers[static_cast<size_t>(l)];
    put_norm(o.attn_norm, L.attn_norm);
    put_matrix(o.wqkv, {L.wq, L.wk, L.wv});
    if (bias) put_vector(o.qkv_bias, {L.q_bias, L.k_bias, L.v_bias});
    if (c.qk_norm) {
      put_norm(o.q_norm, L.q_norm);
      put_norm(o.k_norm, L.k_norm);
    }
    put_matrix(o.wo, {L.wo});
    put_norm(o.ffn_norm, L.ffn_norm);
    if (c.sandwich_norms) {
      put_norm(o.post_attn_norm, L.post_attn_norm);
      put_norm(o.post_ffn_norm, L.post_ffn_norm);
    }
    if (c.n_experts > 0) {
      put_matrix(o.router, {L.router});
      const size_t expert_bytes = expert_matrix_bytes(c);
      for (size_t e = 0; e < L.experts.size(); ++e) {
        const auto& [gate, up, down] = L.experts[e];
        put_matrix(o.experts_gate_up + e * 2 * expert_bytes, {gate, up});
        put_matrix(o.experts_down + e * expert_bytes, {down});
      }
      continue;
    }
    put_matrix(o.w_gate_up, {L.w_gate, L.w_up});
    put_matrix(o.w_down, {L.w_down});
  }
  return m;
}

}  // namespace exactly
