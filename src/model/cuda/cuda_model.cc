#include "model/cuda/cuda_model.h"

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"
#include "model/cuda/kv_pool_cuda.h"
#include "model/cuda/llama_cuda_layers.h"

namespace exactly {

CudaModel::CudaModel(ModelConfig config, const CudaModelOptions& options)
    : config_(std::move(config)), options_(options) {
  const ModelConfig& c = config_;
  if (c.head_dim != 64 && c.head_dim != 128)
    throw Error(strformat("the CUDA backend supports head dims 64 and 128, not %d", c.head_dim), ExitCode::kUsage);
  if (c.n_heads % c.n_kv_heads != 0)
    throw Error(strformat("%d query heads over %d KV heads", c.n_heads, c.n_kv_heads), ExitCode::kUsage);
  int devices = 0;
  if (const cudaError_t st = cudaGetDeviceCount(&devices); st != cudaSuccess || devices == 0)
    throw Error(strformat("--device cuda: no CUDA device is visible (%s)",
                          st != cudaSuccess ? cudaGetErrorString(st) : "the driver reports none"),
                ExitCode::kUsage);
  // The architecture (its products' cuBLASLt handle) before the runner's
  // stream: a throw here leaks nothing.
  layers_ = std::make_unique<CudaLlamaLayers>(c, options.deterministic);
  runner_ = std::make_unique<CudaRunner>(c, options, *layers_);
}

CudaModel::~CudaModel() = default;

int64_t CudaModel::kv_bytes_per_slot() const {
  return int64_t{2} * config_.n_layers * config_.n_kv_heads * config_.head_dim * 2;  // bf16 K and V
}

void CudaModel::reserve(const ModelLimits& limits) { runner_->reserve(limits); }

int64_t CudaModel::default_kv_cache_memory(double utilization) const {
  return runner_->default_kv_cache_memory(utilization);
}

std::unique_ptr<KVPool> CudaModel::make_kv_pool(int64_t num_blocks, int block_size) {
  if (block_size % 16 != 0)
    throw Error(strformat("--block-size %d: the CUDA backend needs a multiple of 16", block_size), ExitCode::kUsage);
  return std::make_unique<CudaKVPool>(config_, num_blocks, block_size);
}

void CudaModel::forward(const ForwardBatch& b, KVPool& kv_pool, float* logits, ThreadPool&, int num_layers,
                        int32_t* tokens) {
  num_layers = check_forward_batch(b, *this, num_layers);
  auto* kv = dynamic_cast<CudaKVPool*>(&kv_pool);
  EXACTLY_CHECK(kv != nullptr, "the CUDA model was given a KV pool of another device");
  runner_->forward(b, *kv, logits, num_layers, tokens);
}

bool CudaModel::last_forward_was_setup() const { return runner_->last_forward_was_setup(); }

int64_t CudaModel::weight_bytes() const { return layers_->weight_bytes(); }

std::string CudaModel::memory_report() const { return runner_->memory_report(); }

std::span<const float> CudaModel::hidden() const { return runner_->hidden(); }

std::span<const float> CudaModel::argmax_probabilities() const { return runner_->argmax_probabilities(); }

}  // namespace exactly
