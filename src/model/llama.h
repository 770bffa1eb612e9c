// The llama architecture (Llama 2/3, SmolLM2, Mistral-style GQA models) on the
// CPU kernels: pre-norm decoder layers with RoPE, grouped-query attention over
// a paged KV cache and a SwiGLU MLP.
#pragma once

#include "core/aligned_vector.h"
#include <functional>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/forward_batch.h"
#include "model/hf_experts.h"
#include "model/hf_weights.h"
#include "model/kv_storage.h"
#include "model/llama_layer.h"
#include "model/model.h"

namespace exactly {

class GGUFFile;


// Views into the memory-mapped file: the weights are used in their stored type.
struct LlamaWeights {
  kernels::WeightMatrix token_embd;  // [vocab, dim]
  std::vector<LlamaLayerWeights> layers;
  const float* output_norm;          // [dim]
  kernels::WeightMatrix output;      // [vocab or output_token_ids.size(), dim]; the embedding table when tied
  const float* rope_factors = nullptr;  // [rope_dims / 2] with config.rope_freq_factors

  // Checks every tensor's presence, type and shape against the config.
  static LlamaWeights from_gguf(const GGUFFile& file, const ModelConfig& config);
};

class LlamaModel final : public Model {
 public:
  // `file` must outlive the model (weights point into its mapping).
  LlamaModel(const GGUFFile& file, ModelConfig config);
  // A Hugging Face checkpoint: matrices used as stored (BF16, F16 or F32),
  // vectors converted to f32 once.
  LlamaModel(std::unique_ptr<HfWeights> weights, ModelConfig config);

  const ModelConfig& config() const override { return config_; }
  const char* device() const override { return "cpu"; }
  const LlamaWeights& weights() const { return weights_; }

  int64_t weight_bytes() const override;
  int64_t kv_bytes_per_slot() const override { return KVStorage::bytes_per_slot(config_); }
  void reserve(const ModelLimits&) override {}
  int64_t default_kv_cache_memory(double) const override { return int64_t{2} << 30; }
  std::unique_ptr<KVPool> make_kv_pool(int64_t num_blocks, int block_size) override;

  // One forward pass over the flattened batch; writes K/V of every token into
  // `kv` and the logits of batch.input.logits_rows into `logits`
  // ([logits_rows.size(), vocab_size]).
  //
  // With num_layers in [1, n_layers), only the first num_layers layers run
  // (and only their KV is written) before the final norm and the output head:
  // the model drafting for itself (self-speculation by layer skipping).
  // `kv` must be a KVStorage (a pool this model made).
  void forward(const ForwardBatch& batch, KVPool& kv, float* logits, ThreadPool& pool, int num_layers = -1,
               int32_t* argmax = nullptr) override;
  bool returns_hidden() const override { return true; }
  std::span<const float> hidden() const override { return {hidden_out_.data(), hidden_size_}; }

  // Rank `rank` of a `size`-way tensor-parallel split of this model
  // (model/tensor_parallel.h): its share of the heads, KV heads, MLP (or
  // every expert's) columns and output-head rows. wq, wk, wv, gate, up and
  // the head are viewed by rows; wo and down are copied by columns; o's and
  // down's biases go to rank 0 only. The shard's forward() sums its partial block outputs with the other
  // ranks' through `collective` and writes only its vocabulary columns of each
  // logits row (no argmax). This model must outlive the shard; the split
  // must divide (check_tensor_parallel).
  std::unique_ptr<LlamaModel> shard(int rank, int size, Collective& collective) const;

 private:
  LlamaModel(const LlamaModel& full, int rank, int size, Collective& collective);
  void ensure_scratch(int64_t n_tokens);
  void init_rope_factors();

  ModelConfig config_;
  std::unique_ptr<HfWeights> hf_;              // a Hugging Face checkpoint's mapping, null for GGUF
  std::vector<std::vector<float>> hf_vectors_;  // its norms and biases as f32
  HfExpertStore hf_experts_;                    // gpt-oss's experts converted from the checkpoint's layout
  TensorShard shard_;                           // size 1: the whole model
  int64_t vocab_begin_ = 0, vocab_end_ = 0;     // a shard's rows of the output head
  std::vector<std::vector<uint8_t>> shard_columns_;  // a shard's copies of wo's and w_down's columns
  LlamaWeights weights_;
  // Activations, grown on demand and reused across passes.
  AlignedVector<float> x_;       // [n_tokens, dim] residual stream
  AlignedVector<float> h_;       // [n_tokens, dim] normed input of a sub-layer
  AlignedVector<float> q_;       // [n_tokens, n_heads * head_dim]
  AlignedVector<float> k_;       // [n_tokens, n_kv_heads * head_dim]
  AlignedVector<float> v_;       // [n_tokens, n_kv_heads * head_dim]
  AlignedVector<float> attn_;    // [n_tokens, n_heads * head_dim]
  AlignedVector<float> proj_;    // [n_tokens, dim] output of wo / w_down
  AlignedVector<float> gate_;    // [n_tokens, ffn_dim]
  AlignedVector<float> up_;      // [n_tokens, ffn_dim]
  MoeScratch moe_;               // the experts' rows (mixture-of-experts models)
  AlignedVector<float> last_;    // [n_logits, dim] rows that produce logits
  AlignedVector<float> head_;    // [n_logits, output_token_ids.size()] a partial head's logits
  AlignedVector<float> hidden_out_;  // [hidden_rows, dim] the last pass's hidden states (hidden())
  size_t hidden_size_ = 0;
  AlignedVector<float> rope_cos_, rope_sin_;  // [n_tokens, rope_dims / 2]: each token's angles, shared by the layers
  AlignedVector<float> local_cos_, local_sin_;  // the same for sliding-window layers with a RoPE base of their own
  std::vector<float> scaled_rope_factors_;      // [rope_dims / 2] with any RoPE scaling (model/rope_scaling.h)
  const float* global_rope_factors_ = nullptr;  // what divides the global layers' frequencies (null: nothing)
};

}  // namespace exactly
