#include "model/cuda/llama_cuda.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"
#include "core/ggml_types.h"
#include "core/half.h"
#include "loader/gguf.h"
#include "model/cuda/kv_pool_cuda.h"
#include "model/cuda/llama_cuda_layers.h"
#include "model/cuda/weight_layout.h"
#include "model/llama.h"

namespace exactly {

namespace kc = kernels::cuda;

namespace {

// GGUF tensor (any stored type) -> bf16 rows appended to `out`.
void append_bf16(const kernels::WeightMatrix& w, std::vector<uint16_t>& out) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  const size_t row_bytes = static_cast<size_t>(ggml_row_bytes(w.type, w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r) * row_bytes, row.data(),
                   w.cols);
    for (float v : row) out.push_back(float_to_bf16(v));
  }
}

void upload(void* dst, const void* src, size_t bytes) {
  kc::check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "uploading weights");
}

}  // namespace

CudaLlamaModel::CudaLlamaModel(ModelConfig config, const CudaModelOptions& options) : config_(std::move(config)) {
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
  // The products' plans before the stream: a throw here leaks nothing.
  layers_ = std::make_unique<CudaLlamaLayers>(c, options.deterministic);
  runner_ = std::make_unique<CudaRunner>(c, options, *layers_);
}

CudaLlamaModel::~CudaLlamaModel() = default;

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
  uint8_t* base = m->layers_->allocate_weights(layout);
  std::vector<uint16_t> staged;
  auto put_matrices = [&](size_t offset, std::initializer_list<kernels::WeightMatrix> parts) {
    staged.clear();
    for (const auto& part : parts) append_bf16(part, staged);
    upload(base + offset, staged.data(), staged.size() * 2);
  };
  auto put_vector = [&](size_t offset, const float* v, int64_t n) {
    upload(base + offset, v, static_cast<size_t>(n) * 4);
  };
  put_matrices(layout.token_embd, {w.token_embd});
  if (!tied) put_matrices(layout.output, {w.output});
  put_vector(layout.output_norm, w.output_norm, c.dim);
  for (int l = 0; l < c.n_layers; ++l) {
    const LlamaLayerWeights& L = w.layers[static_cast<size_t>(l)];
    const auto& o = layout.layers[static_cast<size_t>(l)];
    put_vector(o.attn_norm, L.attn_norm, c.dim);
    put_matrices(o.wqkv, {L.wq, L.wk, L.wv});
    if (c.qk_norm) {
      put_vector(o.q_norm, L.q_norm, c.head_dim);
      put_vector(o.k_norm, L.k_norm, c.head_dim);
    }
    put_matrices(o.wo, {L.wo});
    put_vector(o.ffn_norm, L.ffn_norm, c.dim);
    put_matrices(o.w_gate_up, {L.w_gate, L.w_up});
    put_matrices(o.w_down, {L.w_down});
  }
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
    random(o.w_gate_up, 2 * int64_t{c.ffn_dim}, c.dim);
    random(o.w_down, c.dim, c.ffn_dim);
  }
  kc::check_cuda(cudaStreamSynchronize(m->runner_->stream()), "initialising random weights");
  return m;
}

int64_t CudaLlamaModel::kv_bytes_per_slot() const {
  return int64_t{2} * config_.n_layers * config_.n_kv_heads * config_.head_dim * 2;  // bf16 K and V
}

void CudaLlamaModel::reserve(const ModelLimits& limits) { runner_->reserve(limits); }

int64_t CudaLlamaModel::default_kv_cache_memory(double utilization) const {
  return runner_->default_kv_cache_memory(utilization);
}

std::unique_ptr<KVPool> CudaLlamaModel::make_kv_pool(int64_t num_blocks, int block_size) {
  if (block_size % 16 != 0)
    throw Error(strformat("--block-size %d: the CUDA backend needs a multiple of 16", block_size), ExitCode::kUsage);
  return std::make_unique<CudaKVPool>(config_, num_blocks, block_size);
}

void CudaLlamaModel::forward(const ForwardBatch& b, KVPool& kv_pool, float* logits, ThreadPool&, int num_layers,
                             int32_t* tokens) {
  num_layers = check_forward_batch(b, *this, num_layers);
  auto* kv = dynamic_cast<CudaKVPool*>(&kv_pool);
  EXACTLY_CHECK(kv != nullptr, "the CUDA model was given a KV pool of another device");
  runner_->forward(b, *kv, logits, num_layers, tokens);
}

bool CudaLlamaModel::samples_rows() const { return runner_->samples_rows(); }

int64_t CudaLlamaModel::verified_draft_entries() const { return runner_->verified_draft_entries(); }

bool CudaLlamaModel::last_forward_was_setup() const { return runner_->last_forward_was_setup(); }

int64_t CudaLlamaModel::weight_bytes() const { return layers_->weight_bytes(); }

std::string CudaLlamaModel::memory_report() const { return runner_->memory_report(); }

}  // namespace exactly
