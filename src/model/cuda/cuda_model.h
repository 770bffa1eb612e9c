// Internal to model/cuda: what every Model on the GPU shares, a set of llama
// layers (CudaLlamaLayers) driven by a runner (CudaRunner): the checks of a
// shape the kernels take, the KV pool, and the calls handed to the runner.
// CudaLlamaModel (the target) and CudaDraftHead differ in their loaders and
// in what the engine may ask of the rows they return.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "model/config.h"
#include "model/cuda/cuda_runner.h"
#include "model/model.h"

namespace exactly {

class CudaLlamaLayers;

class CudaModel : public Model {
 public:
  ~CudaModel() override;

  const ModelConfig& config() const override { return config_; }
  const char* device() const override { return "cuda"; }
  int64_t kv_bytes_per_slot() const override;
  void reserve(const ModelLimits& limits) override;
  int64_t default_kv_cache_memory(double gpu_memory_utilization) const override;
  std::unique_ptr<KVPool> make_kv_pool(int64_t num_blocks, int block_size) override;
  void forward(const ForwardBatch& batch, KVPool& kv, float* logits, ThreadPool& pool, int num_layers = -1,
               int32_t* tokens = nullptr) override;
  bool last_forward_was_setup() const override;
  // Bytes of the weights a pass reads (on the GPU: all but the embedding table, unless tied).
  int64_t weight_bytes() const override;
  std::string memory_report() const override;
  // The final hidden state of each of the batch's hidden_rows, rounded to
  // bf16 as a draft head reads it.
  bool returns_hidden() const override { return true; }
  std::span<const float> hidden() const override;
  bool returns_argmax_probabilities() const override { return true; }
  std::span<const float> argmax_probabilities() const override;

  // What a draft head shares with its target: the vocabulary tables
  // (CudaLlamaLayers::borrow_vocab_tables) and the options.
  const CudaLlamaLayers& layers() const { return *layers_; }
  const CudaModelOptions& options() const { return options_; }

 protected:
  // Checks the shape (head dim 64 or 128, whole KV groups) and that a GPU is
  // visible (a usage error otherwise), then makes the layers and their runner.
  CudaModel(ModelConfig config, const CudaModelOptions& options);

  ModelConfig config_;
  CudaModelOptions options_;
  std::unique_ptr<CudaLlamaLayers> layers_;  // the architecture: weights and layers
  std::unique_ptr<CudaRunner> runner_;       // drives layers_; destroyed first
};

}  // namespace exactly
