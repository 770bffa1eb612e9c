// Internal to model/cuda: what the runner (cuda_runner.h) needs of an
// architecture on the GPU. The architecture owns its weights and
// activations and launches its layers' kernels on the stream it is given;
// the runner owns the batch, the attention plan, graphs and the logits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace exactly {

class CudaAttentionPlan;
class CudaKVPool;

// A step's tokens as the layers read them, in device memory (padded in a
// graph step).
struct CudaStepTokens {
  const int32_t* tokens;     // [n] token ids
  const int32_t* positions;  // [n] position of each token in its sequence
  const int64_t* slots;      // [n] KV slot, -1 for a padding token
  int64_t n;
  const void* hidden_in = nullptr;  // bf16 [n, dim]: a draft head's second input (reads_hidden_in), else null
};

class CudaArchitecture {
 public:
  virtual ~CudaArchitecture() = default;

  // Allocates the activations for `tokens` tokens and `head_rows` rows of
  // the output head. The old buffers go: the caller has synchronised its
  // stream and dropped every graph that holds their addresses.
  virtual void allocate_activations(int64_t tokens, int32_t head_rows) = 0;
  // Plans the products of every power-of-two row count up to `max_rows` (the
  // head's up to `head_rows`) now, so that no step pays it.
  virtual void prepare_products(int64_t max_rows, int32_t head_rows, cudaStream_t stream) = 0;
  // Embeds the tokens and runs the first num_layers layers, their attention
  // by `attention`, leaving the residual stream for final_norm_and_head.
  virtual void run_layers(const CudaStepTokens& step, CudaKVPool& kv, const CudaAttentionPlan& attention,
                          int num_layers, cudaStream_t stream) = 0;
  // The logits of `n_rows` tokens of the residual stream:
  // rows [n_rows] token indices (device) -> logits [n_rows, vocab] fp32.
  virtual void final_norm_and_head(const int32_t* rows, int64_t n_rows, float* logits, cudaStream_t stream) = 0;
  // The hidden states of `n_rows` tokens, the vectors the head multiplies:
  // rows [n_rows] token indices (device) -> out [n_rows, dim] bf16.
  virtual void final_norm(const int32_t* rows, int64_t n_rows, void* out_bf16, cudaStream_t stream) = 0;
  // Whether run_layers reads CudaStepTokens::hidden_in (a draft head).
  virtual bool reads_hidden_in() const = 0;

  // GPU memory of the weights, and of the activations and products' workspace.
  virtual size_t weight_memory() const = 0;
  virtual size_t activation_memory() const = 0;
};

}  // namespace exactly
