// A draft head on the GPU (`--spec head:PATH` with --device cuda): the math
// of model/draft_head.h, run by the GPU model's pieces. Its layers are a
// one-layer CudaLlamaLayers whose input is fc · [embed(x_s); h_{s-1}] and
// whose token embedding and output head are its target's (borrowed, not
// copied), driven by a CudaRunner of its own, which uploads each pass's
// hidden states beside its tokens (graph steps included). Weights are bf16,
// as the target's; the hidden states it reads and returns are bf16 values.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "model/config.h"
#include "model/cuda/cuda_runner.h"
#include "model/model.h"

namespace exactly {

class CudaLlamaLayers;
class CudaLlamaModel;

class CudaDraftHead final : public Model {
 public:
  // Reads and checks the file as the CPU head does (model/draft_head_file.h:
  // FileFormatError, exit code 2, naming what is wrong) and uploads it. A
  // partial head (exactly.output_token_ids) runs on the CPU only (exit 2).
  static std::unique_ptr<CudaDraftHead> load(const std::string& path, const CudaLlamaModel& target);
  ~CudaDraftHead() override;

  const ModelConfig& config() const override { return config_; }
  const char* device() const override { return "cuda"; }
  int64_t weight_bytes() const override;
  int64_t kv_bytes_per_slot() const override;
  void reserve(const ModelLimits& limits) override;
  int64_t default_kv_cache_memory(double gpu_memory_utilization) const override;
  std::unique_ptr<KVPool> make_kv_pool(int64_t num_blocks, int block_size) override;
  // batch.input.hidden_in ([n_tokens, dim]) holds each token's h_{s-1}.
  void forward(const ForwardBatch& batch, KVPool& kv, float* logits, ThreadPool& pool, int num_layers = -1,
               int32_t* tokens = nullptr) override;
  bool last_forward_was_setup() const override;
  // g_s of batch.input.hidden_rows.
  bool returns_hidden() const override { return true; }
  std::span<const float> hidden() const override;
  bool returns_argmax_probabilities() const override { return true; }
  std::span<const float> argmax_probabilities() const override;
  std::string memory_report() const override;

 private:
  CudaDraftHead(ModelConfig config, const CudaModelOptions& options);

  ModelConfig config_;
  std::unique_ptr<CudaLlamaLayers> layers_;
  std::unique_ptr<CudaRunner> runner_;  // drives layers_; destroyed first
};

}  // namespace exactly
