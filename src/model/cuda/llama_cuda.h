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
#include "model/cuda/cuda_model.h"
#include "model/cuda/cuda_runner.h"
#include "model/cuda/cuda_sampling_rows.h"
#include "model/model.h"

namespace exactly {

class GGUFFile;

class CudaLlamaModel final : public CudaModel {
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
  static constexpr int64_t kSparseDraftEntries = CudaSamplingRows::kSparseDraftEntries;
  static constexpr int64_t kDenseDraftRows = CudaSamplingRows::kDenseDraftRows;

  // The runner's bounds on step graphs (cuda_runner.h).
  static constexpr size_t kMaxStepGraphs = CudaRunner::kMaxStepGraphs;
  static constexpr int32_t kMaxGraphQuery = CudaRunner::kMaxGraphQuery;
  static constexpr int64_t kGraphReserveBytes = CudaRunner::kGraphReserveBytes;

 private:
  using CudaModel::CudaModel;
};

}  // namespace exactly
