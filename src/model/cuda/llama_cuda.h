// The llama architecture on an NVIDIA GPU: the same forward pass as
// model/llama.h, with bf16 weights (GGUF tensors dequantised at load),
// cuBLASLt products, the paged attention kernels of kernels/cuda and a bf16
// KV cache in GPU memory. The residual stream is fp32.
//
// The model is its architecture (llama_cuda_layers.h: weights and layers)
// driven by a runner (cuda_runner.h: batch upload, attention plan, graphs,
// logits, sampling and verifies).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/config.h"
#include "model/cuda/cuda_runner.h"
#include "model/cuda/cuda_sampling_rows.h"
#include "model/model.h"

namespace exactly {

class GGUFFile;
class CudaLlamaLayers;

class CudaLlamaModel final : public Model {
 public:
  // Validates the file's tensors like the CPU model, then uploads them as bf16.
  static std::unique_ptr<CudaLlamaModel> from_gguf(const GGUFFile& file, ModelConfig config,
                                                   const CudaModelOptions& options);
  // Random weights (uniform, scaled by 1/sqrt(fan-in); norms 1) of the shape
  // `config` describes: benchmarks of models whose weights are not at hand.
  static std::unique_ptr<CudaLlamaModel> with_random_weights(ModelConfig config, uint64_t seed,
                                                             const CudaModelOptions& options);
  // A Hugging Face safetensors checkpoint (model/hf_weights.h checks it before
  // the GPU is touched), as bf16 matrices, f32 norms and q/k/v biases.
  static std::unique_ptr<CudaLlamaModel> from_hf(const std::string& dir, ModelConfig config,
                                                 const CudaModelOptions& options);
  ~CudaLlamaModel() override;

  const ModelConfig& config() const override { return config_; }
  const char* device() const override { return "cuda"; }
  int64_t kv_bytes_per_slot() const override;
  void reserve(const ModelLimits& limits) override;
  int64_t default_kv_cache_memory(double gpu_memory_utilization) const override;
  std::unique_ptr<KVPool> make_kv_pool(int64_t num_blocks, int block_size) override;
  void forward(const ForwardBatch& batch, KVPool& kv, float* logits, ThreadPool& pool, int num_layers = -1,
               int32_t* tokens = nullptr) override;
  // Rows marked kSample are sampled on the GPU (kernels/cuda/sampling.h),
  // unless EXACTLY_CUDA_SAMPLING=0 sends them back to the host's Sampler.
  bool samples_rows() const override;
  // Rows with a logit_bias or a grammar's mask are biased and masked on the
  // GPU before they are sampled, under the same switch.
  bool processes_rows() const override { return samples_rows(); }
  // Sampled verifies run on the GPU too (kernels/cuda/sampling.h), under the
  // same switch, as many as the workspace's draft-distribution space takes in
  // a step: kSparseDraftEntries per draft of every sequence (one-hot prompt
  // lookup, top-k drafts), or kDenseDraftRows whole-vocabulary distributions
  // (a draft model sampled without top-k); beyond that the host verifies.
  int64_t verified_draft_entries() const override;
  bool last_forward_was_setup() const override;
  // The final hidden state of each of the batch's hidden_rows, rounded to
  // bf16 as the head reads it (a draft head's input).
  bool returns_hidden() const override { return true; }
  std::span<const float> hidden() const override;
  bool returns_argmax_probabilities() const override { return true; }
  std::span<const float> argmax_probabilities() const override;
  static constexpr int64_t kSparseDraftEntries = CudaSamplingRows::kSparseDraftEntries;
  static constexpr int64_t kDenseDraftRows = CudaSamplingRows::kDenseDraftRows;

  // Bytes of the weights a pass reads (on the GPU: all but the embedding table, unless tied).
  int64_t weight_bytes() const override;
  std::string memory_report() const override;

  // What a draft head on the GPU shares with its target: the vocabulary
  // tables (CudaLlamaLayers::borrow_vocab_tables) and the options.
  const CudaLlamaLayers& layers() const { return *layers_; }
  const CudaModelOptions& options() const { return options_; }

  // The runner's bounds on step graphs (cuda_runner.h).
  static constexpr size_t kMaxStepGraphs = CudaRunner::kMaxStepGraphs;
  static constexpr int32_t kMaxGraphQuery = CudaRunner::kMaxGraphQuery;
  static constexpr int64_t kGraphReserveBytes = CudaRunner::kGraphReserveBytes;

 private:
  CudaLlamaModel(ModelConfig config, const CudaModelOptions& options);

  ModelConfig config_;
  CudaModelOptions options_;
  std::unique_ptr<CudaLlamaLayers> layers_;  // the architecture: weights and layers
  std::unique_ptr<CudaRunner> runner_;       // drives layers_; destroyed first
};

}  // namespace exactly
