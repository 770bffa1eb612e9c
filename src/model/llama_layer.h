// The decoder layers of the llama family and what they share: the attention
// block and the MLP block over normed rows, one pre-norm llama layer (Llama,
// Mistral, Mixtral, Qwen2/3, and a draft head's layer), and the output head
// over normed rows. gemma3_layer.h builds Gemma 3's layer from the same blocks.
#pragma once

#include <cstdint>
#include <span>

#include "core/aligned_vector.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/moe_mlp.h"

namespace exactly {

struct LlamaLayerWeights {
  const float* attn_norm;  // [dim]
  kernels::WeightMatrix wq;    // [n_heads * head_dim, dim]
  kernels::WeightMatrix wk;    // [n_kv_heads * head_dim, dim]
  kernels::WeightMatrix wv;    // [n_kv_heads * head_dim, dim]
  kernels::WeightMatrix wo;    // [dim, n_heads * head_dim]
  const float* q_bias = nullptr;  // [n_heads * head_dim], with config.attention_bias (Qwen2)
  const float* k_bias = nullptr;  // [n_kv_heads * head_dim]
  const float* v_bias = nullptr;  // [n_kv_heads * head_dim]
  const float* o_bias = nullptr;  // [dim], where the checkpoint has one (gpt-oss)
  const float* sinks = nullptr;   // [n_heads], with config.attention_sinks
  const float* q_norm = nullptr;  // [head_dim], with config.qk_norm: each q head's RMSNorm before RoPE
  const float* k_norm = nullptr;  // [head_dim], the same for k
  const float* post_attn_norm = nullptr;  // [dim], with config.sandwich_norms: on the attention block's output
  const float* ffn_norm;   // [dim]
  kernels::WeightMatrix w_gate;  // [ffn_dim, dim]
  kernels::WeightMatrix w_up;    // [ffn_dim, dim]
  kernels::WeightMatrix w_down;  // [dim, ffn_dim]
  MoeWeights moe;                // with config.n_experts: the experts in place of the three above
  const float* post_ffn_norm = nullptr;  // [dim], with config.sandwich_norms: on the MLP block's output
};

class Collective;

// One rank of a tensor-parallel model (model/tensor_parallel.h): it holds its
// share of the heads and MLP columns, so the outputs of wo and w_down are
// partial sums that the ranks add up (in rank order) before the residual.
struct TensorShard {
  int rank = 0;
  int size = 1;
  Collective* collective = nullptr;
};

// Activations of one pass, each at least as large as its shape for n tokens.
struct LayerBuffers {
  float* h;        // [n, dim] normed input of a sub-layer
  float* q;        // [n, n_heads * head_dim]
  float* k;        // [n, n_kv_heads * head_dim]
  float* v;        // [n, n_kv_heads * head_dim]
  float* attn;     // [n, n_heads * head_dim]
  float* proj;     // [n, dim] output of wo / w_down
  float* gate;     // [n, ffn_dim]
  float* up;       // [n, ffn_dim]
  const float* rope_cos;  // [n, rope_dims / 2] each token's angles; null: the layer applies no RoPE
  const float* rope_sin;  // [n, rope_dims / 2]
  MoeScratch* moe = nullptr;  // with config.n_experts
  const TensorShard* shard = nullptr;  // a rank of a tensor-parallel model: proj is a partial sum
};

// Where a layer's attention reads and writes: its KV cache, each token's
// slot ([n]), the batch, and the layer's sliding window (0: every earlier key).
struct LayerKV {
  const kernels::PagedKV& cache;
  const int64_t* slots;
  const kernels::AttentionBatch& batch;
  int32_t window = 0;
};

// buf.proj = wo · attention(rope(q), rope(k), v) of the normed rows buf.h,
// q, k, v their projections (with biases and per-head norms where the model
// has them); the K/V of every token go to the cache.
void attention_block(const LlamaLayerWeights& L, const ModelConfig& c, int64_t n, const LayerBuffers& buf,
                     const LayerKV& kv, ThreadPool& pool);
// x[t, :] += bias for each of n rows of `width`; nothing without a bias.
void add_bias(float* x, const float* bias, int64_t n, int64_t width);

// A tensor-parallel rank's partial block output (buf.proj, [n, dim]) becomes
// the whole: the sum over the ranks in rank order; nothing without a shard.
void sum_over_ranks(const LayerBuffers& buf, int64_t n, const ModelConfig& c);

// gate[i] = act(gate[i]) * up[i] for i < n, act the config's MLP gate.
void gate_activation(const ModelConfig& c, float* gate, const float* up, int64_t n, ThreadPool& pool);

// buf.proj = w_down · (act(w_gate · h) * (w_up · h)) of the normed rows
// buf.h, act the config's gate, or the same over each token's experts.
void mlp_block(const LlamaLayerWeights& L, const ModelConfig& c, int64_t n, const LayerBuffers& buf, ThreadPool& pool);

// x ([n, dim], the residual stream) += attention block of norm(x), then +=
// MLP block of norm(x).
void llama_layer(const LlamaLayerWeights& L, const ModelConfig& c, float* x, int64_t n, const LayerBuffers& buf,
                 const LayerKV& kv, ThreadPool& pool);

// The logits ([n_out, vocab]) of n_out normed rows ([n_out, dim]) through
// `head`: over every token, or over `token_ids` ([head.rows], a partial
// head) with -inf for every other token, so the row reads like a full one.
// softcap > 0: every finite logit becomes softcap * tanh(logit / softcap)
// (Gemma's final soft-capping) before the argmax. With `argmax` ([n_out]),
// also each row's argmax (the lowest index among equal maxima). `scratch`
// holds a partial head's own logits.
void output_logits(const kernels::WeightMatrix& head, std::span<const int32_t> token_ids, int32_t vocab,
                   const float* normed, int64_t n_out, float* logits, int32_t* argmax, AlignedVector<float>& scratch,
                   ThreadPool& pool, float softcap = 0.0f);

// Rows of whole logits ([n_out, vocab]): each finite logit soft-capped when
// softcap > 0, then with `argmax` each row's argmax (the lowest index among
// equal maxima). output_logits ends with it; a tensor-parallel model runs it
// on the rows its ranks gathered.
void cap_and_argmax(float* logits, int64_t n_out, int32_t vocab, float softcap, int32_t* argmax, ThreadPool& pool);

}  // namespace exactly
