// The llama architecture on an NVIDIA GPU: the same forward pass as
// model/llama.h, with bf16 weights (GGUF tensors dequantised at load),
// cuBLASLt products, the paged attention kernels of kernels/cuda and a bf16
// KV cache in GPU memory. The residual stream is fp32.
//
// One CUDA stream carries a whole pass; the host waits only for the logits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layer_ops.h"
#include "model/attention_runs.h"
#include "model/config.h"
#include "model/model.h"

namespace exactly {

class GGUFFile;
class CudaKVPool;
struct WeightLayout;

struct CudaModelOptions {
  // The canonical order: products and attention whose bits for a row never
  // depend on the batch (docs/ARCHITECTURE.md, "The canonical order").
  bool deterministic = true;
  // Decode steps replay CUDA graphs (one per padded batch size and context
  // bound) instead of launching every kernel from the host.
  bool cuda_graphs = true;
};

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
  bool last_forward_was_setup() const override { return last_forward_was_setup_; }
  static constexpr int64_t kSparseDraftEntries = 64;
  static constexpr int64_t kDenseDraftRows = 16;

  // Bytes of the weights a pass reads (on the GPU: all but the embedding table, unless tied).
  int64_t weight_bytes() const override { return weight_bytes_; }
  std::string memory_report() const override;

  // At most this many step graphs live at once (the least recently used is
  // dropped beyond it), and default_kv_cache_memory() keeps kGraphReserveBytes
  // for each: what instantiated graphs take of GPU memory is part of the
  // --gpu-memory-utilization budget. The bound per graph is several times
  // what one measured (docs/journal/benchmarks-record.md §6).
  static constexpr size_t kMaxStepGraphs = 96;
  // Steps whose sequences bring at most this many tokens each (decode steps,
  // verifies of 1 + k tokens, a draft model's catch-up) replay graphs.
  static constexpr int32_t kMaxGraphQuery = 16;
  static constexpr int64_t kGraphReserveBytes = int64_t{4} << 20;

 private:
  struct Layer {
    float* attn_norm;       // [dim]
    void* wqkv;             // bf16 [(n_heads + 2 n_kv_heads) head_dim, dim]: wq | wk | wv
    float* qkv_bias;        // [(n_heads + 2 n_kv_heads) head_dim] or null
    float* q_norm;          // [head_dim] or null: each q head's RMSNorm before RoPE (Qwen3)
    float* k_norm;          // [head_dim] or null: the same for k
    void* wo;               // bf16 [dim, n_heads head_dim]
    float* ffn_norm;        // [dim]
    void* w_gate_up;        // bf16 [2 ffn_dim, dim]: w_gate | w_up
    void* w_down;           // bf16 [dim, ffn_dim]
  };
  // The activations and the batch's index arrays, sized for `tokens` tokens
  // of `seqs` sequences with tables of `blocks` blocks.
  struct Workspace;

  CudaLlamaModel(ModelConfig config, const CudaModelOptions& options);
  // Allocates weights_ for `layout`, counts the bytes a pass reads and points
  // token_embd_, output_, output_norm_ and layers_ into it; returns its base.
  uint8_t* allocate_weights(const WeightLayout& layout);
  void ensure_workspace(int64_t tokens, int32_t seqs, int32_t blocks, int32_t max_seq_len);
  // The layout of a step run from a graph: `seqs` sequences (the real ones
  // and padding) of `query` tokens each. Query 0 is the batch as given.
  struct StepShape {
    int32_t seqs = 0;
    int32_t query = 0;
  };
  // The padded shape of a step that may replay a graph, if it may.
  std::optional<StepShape> graph_shape(const ForwardBatch& b, int32_t max_query, int block_size) const;
  void upload_batch(const ForwardBatch& b, StepShape shape);
  // Replays (or, on the first sights of its key, runs eagerly and captures)
  // the graph of a padded step.
  void run_graph(const ForwardBatch& b, CudaKVPool& kv, kernels::cuda::AttentionBatchDevice attn, StepShape shape,
                 int num_layers);
  // Plans and times the products of every power-of-two row count up to
  // `max_rows` now, so that no step pays it.
  void prepare_products(int64_t max_rows);
  // One attention kernel launch of a step: a run of its sequences, by the
  // prefill kernel, the split-KV decode kernel, or (under canonical order)
  // the kernel that computes decode rows with the prefill kernel's bits.
  enum class AttentionKernel { kPrefill, kSplitDecode, kExactRows };
  struct AttentionLaunch {
    kernels::cuda::AttentionBatchDevice batch;
    AttentionKernel kernel = AttentionKernel::kPrefill;
  };
  // The launches for `attn`: one when every sequence brings one token, else
  // one per run of split_attention_runs.
  void plan_attention(const ForwardBatch& b, const kernels::cuda::AttentionBatchDevice& attn, bool decode);
  // One launch for a step whose sequences bring `query` tokens each.
  void plan_uniform_attention(const kernels::cuda::AttentionBatchDevice& attn, int32_t query);
  // The kernel for runs of single-token sequences.
  AttentionKernel decode_kernel() const;
  void run_layers(CudaKVPool& kv, int64_t n, int num_layers);
  void compute_logits(const ForwardBatch& b, float* logits, int32_t* tokens);
  // Uploads the sampling parameters of every logits row (kLogits and kArgmax
  // rows as plain greedy ones, which leaves their logits as they are).
  void upload_sampling(const ForwardBatch& b);
  // Uploads the processed rows' jobs, biases and masks, once the masks are filled.
  void upload_processing(const ForwardBatch& b);
  void upload_verifies(const ForwardBatch& b);
  void run_verifies(const ForwardBatch& b);

  ModelConfig config_;
  CudaModelOptions options_;
  cudaStream_t stream_ = nullptr;
  kernels::cuda::RopeLayout rope_layout_ = kernels::cuda::RopeLayout::kAdjacentPairs;
  std::unique_ptr<kernels::cuda::Gemm> gemm_;
  kernels::cuda::DeviceBuffer weights_;  // every tensor, in one allocation
  int64_t weight_bytes_ = 0;
  void* token_embd_ = nullptr;           // bf16 [vocab, dim]
  void* output_ = nullptr;               // bf16 [vocab, dim] (token_embd_ when tied)
  float* output_norm_ = nullptr;         // [dim]
  std::vector<Layer> layers_;
  std::unique_ptr<Workspace> ws_;
  std::vector<AttentionRun> attention_runs_;        // reused by every step
  std::vector<AttentionLaunch> attention_launches_;  // the current step's
  // Captured steps: (padded sequences, tokens each, context bound, layers,
  // KV pool base address, its blocks).
  using GraphKey = std::tuple<int32_t, int32_t, int32_t, int, const void*, int64_t>;
  struct GraphExecDeleter {
    void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
  };
  using GraphExec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;
  struct CapturedGraph {
    GraphExec exec;
    uint64_t last_use = 0;
  };
  std::map<GraphKey, CapturedGraph> graphs_;
  std::set<GraphKey> graph_shapes_seen_;
  uint64_t graph_clock_ = 0;
  // GPU memory the instantiated graphs took (free memory before minus after
  // each instantiation and upload), and how many were made in all.
  int64_t graph_bytes_ = 0;
  int64_t graphs_made_ = 0;
  ModelLimits limits_;
  // Where each of the batch's tokens sits in the padded layout of a graph step.
  std::vector<int32_t> padded_index_;
  bool last_forward_was_setup_ = false;
};

}  // namespace exactly
