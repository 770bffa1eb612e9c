#include "model/cuda/draft_head_cuda.h"

#include <utility>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"
#include "loader/gguf.h"
#include "model/cuda/kv_pool_cuda.h"
#include "model/cuda/llama_cuda.h"
#include "model/cuda/llama_cuda_layers.h"
#include "model/cuda/weight_layout.h"
#include "model/cuda/weight_upload.h"
#include "model/draft_head_file.h"

namespace exactly {

std::unique_ptr<CudaDraftHead> CudaDraftHead::load(const std::string& path, const CudaLlamaModel& target) {
  const std::unique_ptr<GGUFFile> file = GGUFFile::open(path);
  const DraftHeadFile read = DraftHeadFile::read(*file, target.config());
  if (!read.config.output_token_ids.empty())
    throw Error(strformat("%s: a head over some of the tokens (exactly.output_token_ids) runs on the CPU only",
                          path.c_str()),
                ExitCode::kUsage);
  std::unique_ptr<CudaDraftHead> head(new CudaDraftHead(read.config, target.options()));
  const ModelConfig& c = head->config_;
  const WeightLayout layout = WeightLayout::draft_head(c);
  WeightUploader put(head->layers_->allocate_weights(layout));
  put.matrices(layout.fc, {read.fc});
  put.vector(layout.output_norm, read.norm, c.dim);
  upload_layer(put, layout.layers.front(), read.layer, c);
  head->layers_->borrow_vocab_tables(target.layers());
  return head;
}

CudaDraftHead::CudaDraftHead(ModelConfig config, const CudaModelOptions& options) : config_(std::move(config)) {
  const ModelConfig& c = config_;
  if (c.head_dim != 64 && c.head_dim != 128)
    throw Error(strformat("a draft head on the GPU needs head dim 64 or 128, not %d", c.head_dim), ExitCode::kUsage);
  layers_ = std::make_unique<CudaLlamaLayers>(c, options.deterministic);
  runner_ = std::make_unique<CudaRunner>(c, options, *layers_);
}

CudaDraftHead::~CudaDraftHead() = default;

int64_t CudaDraftHead::weight_bytes() const { return layers_->weight_bytes(); }

int64_t CudaDraftHead::kv_bytes_per_slot() const {
  return int64_t{2} * config_.n_kv_heads * config_.head_dim * 2;  // one layer's bf16 K and V
}

void CudaDraftHead::reserve(const ModelLimits& limits) { runner_->reserve(limits); }

int64_t CudaDraftHead::default_kv_cache_memory(double utilization) const {
  return runner_->default_kv_cache_memory(utilization);
}

std::unique_ptr<KVPool> CudaDraftHead::make_kv_pool(int64_t num_blocks, int block_size) {
  if (block_size % 16 != 0)
    throw Error(strformat("--block-size %d: the CUDA backend needs a multiple of 16", block_size), ExitCode::kUsage);
  return std::make_unique<CudaKVPool>(config_, num_blocks, block_size);
}

void CudaDraftHead::forward(const ForwardBatch& b, KVPool& kv_pool, float* logits, ThreadPool&, int num_layers,
                            int32_t* tokens) {
  num_layers = check_forward_batch(b, *this, num_layers);
  auto* kv = dynamic_cast<CudaKVPool*>(&kv_pool);
  EXACTLY_CHECK(kv != nullptr, "the draft head was given a KV pool of another device");
  runner_->forward(b, *kv, logits, num_layers, tokens);
}

bool CudaDraftHead::last_forward_was_setup() const { return runner_->last_forward_was_setup(); }

std::span<const float> CudaDraftHead::hidden() const { return runner_->hidden(); }

std::span<const float> CudaDraftHead::argmax_probabilities() const { return runner_->argmax_probabilities(); }

std::string CudaDraftHead::memory_report() const { return "draft head: " + runner_->memory_report(); }

}  // namespace exactly
