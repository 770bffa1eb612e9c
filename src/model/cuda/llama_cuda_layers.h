// Internal to model/cuda: the llama architecture's weights and layers on the
// GPU, the math of model/llama.h: bf16 weights (one allocation, laid out by
// weight_layout.h), products by kernels/cuda/gemm.h, an fp32 residual stream.
// The runner (cuda_runner.h) drives it through CudaArchitecture.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layer_ops.h"
#include "model/config.h"
#include "model/cuda/cuda_architecture.h"

namespace exactly {

struct WeightLayout;

class CudaLlamaLayers final : public CudaArchitecture {
 public:
  // deterministic: products in the canonical order.
  CudaLlamaLayers(const ModelConfig& config, bool deterministic);

  // Allocates the weights for `layout`, counts the bytes a pass reads and
  // points every tensor into them; returns their base.
  uint8_t* allocate_weights(const WeightLayout& layout);
  // A draft head's layers (WeightLayout::draft_head) take the token
  // embedding and the output head of their target's, which outlives them.
  void borrow_vocab_tables(const CudaLlamaLayers& target);
  // Bytes of the weights a pass reads (all but the embedding table, unless tied).
  int64_t weight_bytes() const { return weight_bytes_; }
  // The RoPE scaling of the config (model/rope_scaling.h), with a GGUF file's
  // rope_freqs.weight when it has one (`file_factors`, [rope_dims / 2] on
  // the host; null: none). The constructor sets the config's alone.
  void set_rope_scaling(const float* file_factors);

  void allocate_activations(int64_t tokens, int32_t head_rows) override;
  void prepare_products(int64_t max_rows, int32_t head_rows, cudaStream_t stream) override;
  void run_layers(const CudaStepTokens& step, CudaKVPool& kv, const CudaAttentionPlan& attention, int num_layers,
                  cudaStream_t stream) override;
  void final_norm_and_head(const int32_t* rows, int64_t n_rows, float* logits, cudaStream_t stream) override;
  void final_norm(const int32_t* rows, int64_t n_rows, void* out_bf16, cudaStream_t stream) override;
  bool reads_hidden_in() const override { return fc_ != nullptr; }
  size_t weight_memory() const override { return weights_.bytes(); }
  size_t activation_memory() const override;

 private:
  struct Layer {
    float* attn_norm;  // [dim]
    void* wqkv;        // bf16 [(n_heads + 2 n_kv_heads) head_dim, dim]: wq | wk | wv
    float* qkv_bias;   // [(n_heads + 2 n_kv_heads) head_dim] or null
    float* q_norm;     // [head_dim] or null: each q head's RMSNorm before RoPE (Qwen3)
    float* k_norm;     // [head_dim] or null: the same for k
    void* wo;          // bf16 [dim, n_heads head_dim]
    float* ffn_norm;   // [dim]
    void* w_gate_up;   // bf16 [2 ffn_dim, dim]: w_gate | w_up
    void* w_down;      // bf16 [dim, ffn_dim]
    // With experts (weight_layout.h), in place of the two above.
    void* router;           // bf16 [n_experts, dim]
    void* experts_gate_up;  // bf16 [n_experts, 2 expert_ffn_dim, dim]
    void* experts_down;     // bf16 [n_experts, dim, expert_ffn_dim]
    float* post_attn_norm;  // [dim] or null: with sandwich norms, on the attention's output (Gemma 3)
    float* post_ffn_norm;   // [dim] or null: the same on the MLP's output
  };

  // x = embed(tokens), or for a draft head x = fc · [embed(tokens); hidden_in].
  void embed(const CudaStepTokens& step, cudaStream_t stream);
  // h = rmsnorm(x) * weight.
  void norm(const float* weight, int64_t n, cudaStream_t stream);
  // x += attention(h): the layer's attention block, with the RoPE angles of
  // the layer's kind (a sliding layer's own base, or the global one's).
  void add_attention(const Layer& L, const kernels::cuda::PagedKVDevice& cache, const CudaStepTokens& step,
                     const CudaAttentionPlan& attention, const void* angles, cudaStream_t stream);
  // x += mlp(h): the layer's MLP block.
  void add_mlp(const Layer& L, int64_t n, cudaStream_t stream);
  // x += out · wᵀ, through post_norm first when the layer has one (Gemma 3's
  // sandwich norms): a block's output product and its residual add.
  void add_output(const void* in, const void* w, int64_t n, int64_t k, const float* post_norm, cudaStream_t stream);
  // x += moe(h): the layer's experts in place of the MLP.
  void add_experts(const Layer& L, int64_t n, cudaStream_t stream);

  ModelConfig config_;
  kernels::cuda::RopeLayout rope_layout_ = kernels::cuda::RopeLayout::kAdjacentPairs;
  std::unique_ptr<kernels::cuda::Gemm> gemm_;
  float scale_;                          // attention's score scale: 1 / sqrt(head_dim), or the config's
  kernels::cuda::DeviceBuffer weights_;  // every tensor, in one allocation
  kernels::cuda::DeviceBuffer rope_divisors_;  // fp32 [rope_dims / 2] of a scaled RoPE; empty: unscaled
  float rope_magnitude_ = 1.0f;                // what multiplies every cosine and sine (YaRN's)
  int64_t weight_bytes_ = 0;
  void* token_embd_ = nullptr;    // bf16 [vocab, dim]
  void* output_ = nullptr;        // bf16 [vocab, dim] (token_embd_ when tied)
  float* output_norm_ = nullptr;  // [dim]
  void* fc_ = nullptr;            // bf16 [dim, 2 dim]: a draft head's input projection, else null
  std::vector<Layer> layers_;
  // Activations of a pass of up to T tokens, `head_rows` rows through the head.
  kernels::cuda::DeviceBuffer x_;        // fp32 [T, dim]: the residual stream
  kernels::cuda::DeviceBuffer h_;        // bf16 [T, dim]: a norm's output
  kernels::cuda::DeviceBuffer qkv_;      // bf16 [T, (n_heads + 2 n_kv_heads) head_dim]
  kernels::cuda::DeviceBuffer q_;        // bf16 [T, n_heads head_dim]: q after RoPE
  kernels::cuda::DeviceBuffer attn_;     // bf16 [T, n_heads head_dim]: attention's output
  kernels::cuda::DeviceBuffer gate_up_;  // bf16 [T, 2 ffn_dim]: gate | up
  kernels::cuda::DeviceBuffer act_;      // bf16 [T, ffn_dim]: silu(gate) * up
  kernels::cuda::DeviceBuffer angles_;   // [T, rope_dims / 2] rotary angles (8 bytes each)
  kernels::cuda::DeviceBuffer local_angles_;  // the same at the sliding layers' own base (Gemma 3), or empty
  kernels::cuda::DeviceBuffer unrotated_angles_;  // (1, 0) pairs: SmolLM3's NoPE layers rotate by nothing, or empty
  kernels::cuda::DeviceBuffer proj_;     // fp32 [T, dim]: a block's output before its post-norm (sandwich norms)
  kernels::cuda::DeviceBuffer last_;     // bf16 [head_rows, dim]: the head's normed rows
  kernels::cuda::DeviceBuffer beside_;   // bf16 [T, 2 dim]: a draft head's [embed; hidden_in]
  // With experts: T k rows, one per (token, chosen expert).
  kernels::cuda::DeviceBuffer router_logits_;  // fp32 [T, n_experts]
  kernels::cuda::DeviceBuffer routes_;         // kernels/cuda/moe.h's MoeRoutes for T tokens
  kernels::cuda::DeviceBuffer expert_out_;     // fp32 [T k, dim]: each row's expert output
};

}  // namespace exactly
