// Internal to model/cuda: which attention kernel runs which sequences of a
// step. The runner plans a step's launches; the architecture's layers run
// them for each layer's q and KV cache.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/attention.h"
#include "model/attention_runs.h"
#include "model/forward_batch.h"

namespace exactly {

class CudaAttentionPlan {
 public:
  // deterministic: the canonical order (decode rows with the prefill kernel's bits).
  explicit CudaAttentionPlan(bool deterministic) : deterministic_(deterministic) {}

  // The launches for `attn`: one when every sequence brings one token
  // (`decode`), else one per run of split_attention_runs.
  void plan(const ModelInput& b, const kernels::cuda::AttentionBatchDevice& attn, bool decode);
  // One launch for a step whose sequences bring `query` tokens each.
  void plan_uniform(const kernels::cuda::AttentionBatchDevice& attn, int32_t query);
  // The decode kernel's workspace, [decode_bytes] bytes: the split-KV
  // kernel's partials, or the exact rows' split path's scores and probabilities.
  void set_decode_workspace(void* decode, int64_t decode_bytes) {
    decode_ = decode;
    decode_bytes_ = decode_bytes;
  }

  // The planned launches over one layer's cache:
  // q [q_rows, n_heads, head_dim] bf16 -> out [q_rows, n_heads, head_dim] bf16.
  void run(const kernels::cuda::PagedKVDevice& cache, const void* q, int n_heads, float scale, void* out,
           cudaStream_t stream) const;

 private:
  // One attention kernel launch of a step: a run of its sequences, by the
  // prefill kernel, the split-KV decode kernel, or (under canonical order)
  // the kernel that computes decode rows with the prefill kernel's bits.
  enum class Kernel { kPrefill, kSplitDecode, kExactRows };
  struct Launch {
    kernels::cuda::AttentionBatchDevice batch;
    Kernel kernel = Kernel::kPrefill;
  };
  // The kernel for runs of single-token sequences.
  Kernel decode_kernel() const;

  bool deterministic_;
  void* decode_ = nullptr;
  int64_t decode_bytes_ = 0;
  std::vector<AttentionRun> runs_;  // reused by every step
  std::vector<Launch> launches_;    // the current step's
};

}  // namespace exactly
