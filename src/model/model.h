// What the engine needs of a model, whatever device it runs on: one forward
// pass over a flattened batch into a paged KV pool of that device, and the
// pool's size per token. The CPU model (llama.h) and the CUDA model
// (cuda/llama_cuda.h) implement it; the engine, the scheduler and the KV
// bookkeeping are the same for both.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "model/config.h"
#include "model/forward_batch.h"

namespace exactly {

// The tensor data of a paged KV cache: one pool of fixed-size blocks per
// layer, on the model's device. Which block belongs to which sequence is
// bookkeeping that lives elsewhere (kvcache/).
class KVPool {
 public:
  virtual ~KVPool() = default;
  virtual int64_t num_blocks() const = 0;
  virtual int block_size() const = 0;
  // Copies whole blocks (every layer, K and V), in order: copy-on-write
  // before a forward pass. pairs: (src, dst) block ids.
  virtual void copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& pairs) = 0;
};

// Where the activations' workspace must be ready before the KV pool takes
// what memory is left (GPU); the CPU model grows its scratch on demand.
struct ModelLimits {
  int64_t max_batch_tokens = 0;  // tokens in one forward pass
  int32_t max_seqs = 0;          // sequences in one forward pass
  int32_t max_model_len = 0;     // tokens of one sequence
  int32_t block_size = 16;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelConfig& config() const = 0;
  // "cpu" or "cuda".
  virtual const char* device() const = 0;

  // Bytes of weights one full pass reads (what bounds decoding speed).
  virtual int64_t weight_bytes() const = 0;
  // Bytes of K+V per token slot over all layers, in the pool's element type.
  virtual int64_t kv_bytes_per_slot() const = 0;
  // Prepares every buffer a forward pass within `limits` needs (GPU: the
  // activation workspace), so that measuring free memory afterwards is honest.
  virtual void reserve(const ModelLimits& limits) = 0;
  // Bytes the KV cache may take when the user did not set --kv-cache-memory:
  // on a GPU what `gpu_memory_utilization` of the device leaves after what is
  // allocated now; on the CPU a fixed default.
  virtual int64_t default_kv_cache_memory(double gpu_memory_utilization) const = 0;
  virtual std::unique_ptr<KVPool> make_kv_pool(int64_t num_blocks, int block_size) = 0;
  // One line on where device memory went (weights, workspace, graphs), or
  // empty where there is nothing beyond the weights to tell.
  virtual std::string memory_report() const { return {}; }

  // One forward pass over the flattened batch; writes K/V of every token into
  // `kv` (a pool this model made) and the logits of batch.input.logits_rows into
  // `logits` ([logits_rows.size(), vocab_size], host memory).
  //
  // With num_layers in [1, n_layers), only the first num_layers layers run
  // (and only their KV is written) before the final norm and the output head:
  // the model drafting for itself (self-speculation by layer skipping).
  // `pool` runs the CPU kernels; a GPU model ignores it.
  //
  // With `tokens` ([logits_rows.size()]), also writes each row's token: the
  // argmax (the lowest index among equal maxima), or for rows marked kSample
  // in batch.jobs.row_use the token drawn by batch.jobs.row_sampling. Rows not marked
  // kLogits may then be left out of `logits`.
  virtual void forward(const ForwardBatch& batch, KVPool& kv, float* logits, ThreadPool& pool, int num_layers = -1,
                       int32_t* tokens = nullptr) = 0;

  // Whether forward() samples rows marked kSample itself (on its device,
  // where the logits are); a model that does not refuses such rows.
  virtual bool samples_rows() const { return false; }
  // Whether forward() also processes the rows of batch.jobs.row_processing before
  // sampling them (logit_bias, a grammar's mask); the host processes them
  // otherwise, from the whole row.
  virtual bool processes_rows() const { return false; }
  // How many draft-distribution entries (summed over a batch's verifies and
  // their positions) forward() can take in the verifies it runs itself
  // (batch.jobs.verifies); 0: it runs none. The engine leaves a verify that would
  // not fit to the host's rejection sampler.
  virtual int64_t verified_draft_entries() const { return 0; }
  // Whether the last forward() paid a set-up that later passes of its shape
  // do not (a CUDA graph's first eager run or its capture): its time says
  // nothing of what such a step costs, and a cost model leaves it out.
  virtual bool last_forward_was_setup() const { return false; }
  // Whether forward() returns the hidden states of batch.input.hidden_rows.
  virtual bool returns_hidden() const { return false; }
  // [hidden_rows.size(), dim] of the last forward(): each row's final hidden
  // state after the output norm (of the layers that ran), the vector the
  // output head multiplies. A draft head reads it (model/draft_head.h).
  virtual std::span<const float> hidden() const { return {}; }
  // Whether forward(), given `tokens`, returns a kArgmax row's token without
  // its logits and, with batch.jobs.argmax_probabilities, that token's
  // probability at temperature 1 (argmax_probabilities()): a drafter on a
  // device then draws greedy drafts without the vocabulary crossing to the host.
  virtual bool returns_argmax_probabilities() const { return false; }
  // [logits_rows] of the last forward() that asked for them: 1 / sum_j
  // exp(l_j - l_max) for each kArgmax row (other rows' entries undefined).
  virtual std::span<const float> argmax_probabilities() const { return {}; }
};

// Checks what every model assumes of a batch (array sizes, token ids inside
// the vocabulary, logits rows inside the batch) and returns num_layers
// resolved (-1: all). Bad token ids throw Error; the rest are the caller's
// bugs and abort.
// Rows the model does not sample or verify (Model::samples_rows(),
// verified_draft_entries()) are bugs too.
int check_forward_batch(const ForwardBatch& batch, const Model& model, int num_layers);

}  // namespace exactly
