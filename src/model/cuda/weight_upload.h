// Internal to model/cuda: GGUF tensors into the GPU weight layout, matrices
// as bf16 rows and vectors as f32. Shared by the model's and the draft
// head's loaders.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/ggml_types.h"
#include "core/half.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/cuda/weight_layout.h"
#include "model/llama_layer.h"

namespace exactly {

// GGUF tensor (any stored type) -> bf16 rows appended to `out`.
inline void append_bf16(const kernels::WeightMatrix& w, std::vector<uint16_t>& out) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  const size_t row_bytes = static_cast<size_t>(ggml_row_bytes(w.type, w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * row_bytes, row.data(),
                   w.cols);
    for (float v : row) out.push_back(float_to_bf16(v));
  }
}

// Uploads host tensors into one weight allocation at `base`.
class WeightUploader {
 public:
  explicit WeightUploader(uint8_t* base) : base_(base) {}
  // The matrices' rows one after another, as bf16, at `offset`.
  void matrices(size_t offset, std::initializer_list<kernels::WeightMatrix> parts) {
    staged_.clear();
    for (const auto& part : parts) append_bf16(part, staged_);
    copy(offset, staged_.data(), staged_.size() * 2);
  }
  void vector(size_t offset, const float* v, int64_t n) { copy(offset, v, static_cast<size_t>(n) * 4); }

 private:
  void copy(size_t offset, const void* src, size_t bytes) {
    kernels::cuda::check_cuda(cudaMemcpy(base_ + offset, src, bytes, cudaMemcpyHostToDevice), "uploading weights");
  }
  uint8_t* base_;
  std::vector<uint16_t> staged_;
};

// A mixture-of-experts layer's router and experts (no biases) at its offsets.
inline void upload_experts(WeightUploader& put, const WeightLayout::LayerOffsets& o, const MoeWeights& moe,
                           const ModelConfig& c) {
  put.matrices(o.router, {moe.router});
  const size_t expert_bytes = expert_matrix_bytes(c);
  for (size_t e = 0; e < moe.experts.size(); ++e) {
    const ExpertWeights& x = moe.experts[e];
    put.matrices(o.experts_gate_up + e * 2 * expert_bytes, {x.gate, x.up});
    put.matrices(o.experts_down + e * expert_bytes, {x.down});
  }
}

// A llama layer's tensors (no biases) at its offsets.
inline void upload_layer(WeightUploader& put, const WeightLayout::LayerOffsets& o, const LlamaLayerWeights& L,
                         const ModelConfig& c) {
  put.vector(o.attn_norm, L.attn_norm, c.dim);
  put.matrices(o.wqkv, {L.wq, L.wk, L.wv});
  if (c.qk_norm) {
    put.vector(o.q_norm, L.q_norm, c.head_dim);
    put.vector(o.k_norm, L.k_norm, c.head_dim);
  }
  put.matrices(o.wo, {L.wo});
  put.vector(o.ffn_norm, L.ffn_norm, c.dim);
  if (c.sandwich_norms) {
    put.vector(o.post_attn_norm, L.post_attn_norm, c.dim);
    put.vector(o.post_ffn_norm, L.post_ffn_norm, c.dim);
  }
  if (c.n_experts > 0) {
    upload_experts(put, o, L.moe, c);
    return;
  }
  put.matrices(o.w_gate_up, {L.w_gate, L.w_up});
  put.matrices(o.w_down, {L.w_down});
}

}  // namespace exactly
