// CudaLlamaModel from a GGUF file or with random weights: the tensors are
// converted to bf16 matrices and f32 vectors and uploaded into the layout
// every loader shares (weight_layout.h).
#include <cmath>

#include "core/error.h"
#include "core/format.h"
#include "loader/gguf.h"
#include "model/cuda/llama_cuda.h"
#include "model/cuda/llama_cuda_layers.h"
#include "model/cuda/weight_layout.h"
#include "model/cuda/weight_upload.h"
#include "model/llama.h"

namespace exactly {

namespace kc = kernels::cuda;

std::unique_ptr<CudaLlamaModel> CudaLlamaModel::from_gguf(const GGUFFile& file, ModelConfig config,
                                                          const CudaModelOptions& options) {
  if (!config.output_token_ids.empty())
    throw Error(strformat("%s: a head over some of the tokens (exactly.output_token_ids, a draft model's) runs on "
                          "the CPU only",
                          file.path().c_str()),
                ExitCode::kUsage);
  const LlamaWeights w = LlamaWeights::from_gguf(file, config);  // validates shapes and types
  const bool tied = w.output.data == w.token_embd.data;
  std::unique_ptr<CudaLlamaModel> m(new CudaLlamaModel(std::move(config), options));
  const ModelConfig& c = m->config_;
  const WeightLayout layout(c, tied, false);
  WeightUploader put(m->layers_->allocate_weights(layout));
  put.matrices(layout.token_embd, {w.token_embd});
  if (!tied) put.matrices(layout.output, {w.output});
  put.vector(layout.output_norm, w.output_norm, c.dim);
  for (int l = 0; l < c.n_layers; ++l)
    upload_layer(put, layout.layers[static_cast<size_t>(l)], w.layers[static_cast<size_t>(l)], c);
  if (w.rope_factors != nullptr) m->layers_->set_rope_scaling(w.rope_factors);
  return m;
}

std::unique_ptr<CudaLlamaModel> CudaLlamaModel::with_random_weights(ModelConfig config, uint64_t seed,
                                                                    const CudaModelOptions& options) {
  std::unique_ptr<CudaLlamaModel> m(new CudaLlamaModel(std::move(config), options));
  const ModelConfig& c = m->config_;
  const WeightLayout layout(c, false, false);
  uint8_t* base = m->layers_->allocate_weights(layout);
  uint64_t stream_id = seed * 0x9e3779b97f4a7c15ull;
  auto random = [&](size_t offset, int64_t rows, int64_t cols) {
    kc::fill_uniform_bf16(base + offset, rows * cols, 1.0f / std::sqrt(static_cast<float>(cols)), ++stream_id << 40,
                          m->runner_->stream());
  };
  auto ones = [&](size_t offset, int64_t n) {
    kc::fill_f32(reinterpret_cast<float*>(base + offset), n, 1.0f, m->runner_->stream());
  };
  random(layout.token_embd, c.vocab_size, c.dim);
  random(layout.output, c.vocab_size, c.dim);
  ones(layout.output_norm, c.dim);
  for (const auto& o : layout.layers) {
    ones(o.attn_norm, c.dim);
    random(o.wqkv, qkv_rows(c), c.dim);
    if (c.qk_norm) {
      ones(o.q_norm, c.head_dim);
      ones(o.k_norm, c.head_dim);
    }
    random(o.wo, c.dim, q_width(c));
    ones(o.ffn_norm, c.dim);
    if (c.n_experts > 0) {
      random(o.router, c.n_experts, c.dim);
      random(o.experts_gate_up, int64_t{c.n_experts} * 2 * c.expert_ffn_dim, c.dim);
      random(o.experts_down, int64_t{c.n_experts} * c.dim, c.expert_ffn_dim);
    } else {
      random(o.w_gate_up, 2 * int64_t{c.ffn_dim}, c.dim);
      random(o.w_down, c.dim, c.ffn_dim);
    }
  }
  kc::check_cuda(cudaStreamSynchronize(m->runner_->stream()), "initialising random weights");
  return m;
}

}  // namespace exactly
