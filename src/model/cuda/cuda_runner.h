// Internal to model/cuda: runs an architecture's forward pass on one CUDA
// stream. The runner owns what every architecture shares: the batch's index
// arrays and their upload, the attention plan, the step graphs, the logits,
// and the jobs on the logits rows (sampling, processing, verifies). The
// architecture (cuda_architecture.h) owns its weights, activations and layers.
//
// One CUDA stream carries a whole pass; the host waits only for the logits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "model/config.h"
#include "model/cuda/cuda_architecture.h"
#include "model/cuda/cuda_attention_plan.h"
#include "model/cuda/cuda_graphs.h"
#include "model/cuda/cuda_sampling_rows.h"
#include "model/forward_batch.h"
#include "model/model.h"

namespace exactly {

class CudaKVPool;

struct CudaModelOptions {
  // The canonical order: products and attention whose bits for a row never
  // depend on the batch (docs/ARCHITECTURE.md, "The canonical order").
  bool deterministic = true;
  // Decode steps replay CUDA graphs (one per padded batch size and context
  // bound) instead of launching every kernel from the host.
  bool cuda_graphs = true;
};

class CudaRunner {
 public:
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

  // Creates the stream; `arch` outlives the runner.
  CudaRunner(const ModelConfig& config, const CudaModelOptions& options, CudaArchitecture& arch);
  ~CudaRunner();
  CudaRunner(const CudaRunner&) = delete;
  CudaRunner& operator=(const CudaRunner&) = delete;

  cudaStream_t stream() const { return stream_; }
  // Model's members of the same names (model/model.h).
  void reserve(const ModelLimits& limits);
  int64_t default_kv_cache_memory(double gpu_memory_utilization) const;
  // A checked batch (check_forward_batch) over num_layers layers.
  void forward(const ForwardBatch& b, CudaKVPool& kv, float* logits, int num_layers, int32_t* tokens);
  bool samples_rows() const;
  int64_t verified_draft_entries() const;
  bool last_forward_was_setup() const { return last_forward_was_setup_; }
  // [hidden_rows, dim] of the last forward: the hidden states of the batch's
  // hidden_rows (Model::hidden()), bf16 values as the head reads them.
  std::span<const float> hidden() const { return hidden_; }
  // [logits_rows] of the last forward with jobs.argmax_probabilities (Model's).
  std::span<const float> argmax_probabilities() const { return argmax_probabilities_; }
  std::string memory_report() const;

 private:
  // The batch's device arrays, grown (never shrunk) to the largest batch seen;
  // reserve() sizes them for the engine's limits up front.
  struct Workspace {
    int64_t tokens = 0;
    int32_t seqs = 0, blocks = 0, max_seq_len = 0, logits_rows = 0;
    kernels::cuda::DeviceBuffer logits;  // [logits_rows, vocab] fp32: a chunk of the step's logits rows
    kernels::cuda::DeviceBuffer argmax;  // [tokens] int32: each logits row's token
    kernels::cuda::DeviceBuffer argmax_probability;  // [tokens] fp32: that token's probability, when asked
    kernels::cuda::DeviceBuffer decode;  // split-KV decode partials, decode_bytes
    size_t decode_bytes = 0;
    // tokens, positions, slots, query_start, seq_lens, block tables, logits rows
    kernels::cuda::DeviceBuffer index;
    kernels::cuda::PinnedBuffer staging;  // host side of `index`
    // Offsets of the index arrays (bytes).
    size_t off_tokens = 0, off_positions = 0, off_slots = 0, off_query_start = 0, off_seq_lens = 0, off_tables = 0,
           off_rows = 0, off_hidden_rows = 0, index_bytes = 0;
    // A draft head's second input, bf16 [tokens, dim] (reads_hidden_in), and
    // its host side.
    kernels::cuda::DeviceBuffer hidden_in;
    kernels::cuda::PinnedBuffer hidden_in_staging;
    // The hidden states asked of a pass, bf16 [tokens, dim], made on first
    // request, and their host side.
    kernels::cuda::DeviceBuffer hidden_out;
    kernels::cuda::PinnedBuffer hidden_out_staging;
  };

  // Grows the workspace for `tokens` tokens of `seqs` sequences with tables
  // of `blocks` blocks and contexts of up to max_seq_len.
  void ensure_workspace(int64_t tokens, int32_t seqs, int32_t blocks, int32_t max_seq_len);
  void allocate_index(size_t tokens, size_t seqs, size_t blocks);
  void upload_batch(const ModelInput& b, StepShape shape);
  // b.hidden_in as bf16 at each token's place in `shape`'s layout, uploaded.
  void upload_hidden_in(const ModelInput& b, StepShape shape);
  // The hidden states of b.hidden_rows, copied back (complete once the
  // stream is synchronised) and then unpacked into hidden_.
  void compute_hidden(const ModelInput& b);
  void unpack_hidden(const ModelInput& b);
  // The step's tokens as the index arrays hold them.
  CudaStepTokens step_tokens(int64_t n) const;
  // Replays (or, on the first sights of its key, runs eagerly and captures)
  // the graph of a padded step.
  void run_graph(const ModelInput& b, CudaKVPool& kv, kernels::cuda::AttentionBatchDevice attn, StepShape shape,
                 int num_layers);
  void compute_logits(const ForwardBatch& b, float* logits, int32_t* tokens);
  // Copies back the runs of a chunk's rows [first, first + rows) that are
  // wanted whole.
  void download_logits(const ForwardBatch& b, int64_t first, int64_t rows, float* logits, int32_t* tokens);

  ModelConfig config_;
  CudaModelOptions options_;
  CudaArchitecture& arch_;
  cudaStream_t stream_ = nullptr;
  Workspace ws_;
  CudaSamplingRows rows_;
  CudaAttentionPlan attention_;
  CudaGraphCache graphs_;
  ModelLimits limits_;
  // Where each of the batch's tokens sits in the padded layout of a graph step.
  std::vector<int32_t> padded_index_;
  std::vector<float> hidden_;
  std::vector<float> argmax_probabilities_;
  bool last_forward_was_setup_ = false;
};

}  // namespace exactly
