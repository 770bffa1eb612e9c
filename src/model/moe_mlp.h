// A mixture-of-experts MLP (Mixtral, Qwen3-MoE, gpt-oss): each token's
// router logits (plus a bias, gpt-oss) pick its k best experts, whose gated
// MLP outputs (the config's activation, biases where the model has them) are
// summed with weights softmax(logits of the chosen k).
#pragma once

#include <cstdint>
#include <vector>

#include "core/aligned_vector.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "model/config.h"

namespace exactly {

struct ExpertWeights {
  kernels::WeightMatrix gate;  // [expert_ffn_dim, dim]
  kernels::WeightMatrix up;    // [expert_ffn_dim, dim]
  kernels::WeightMatrix down;  // [dim, expert_ffn_dim]
  // With config.expert_biases: [expert_ffn_dim], [expert_ffn_dim], [dim].
  const float* gate_bias = nullptr;
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;
};

struct MoeWeights {
  kernels::WeightMatrix router;  // [n_experts, dim]
  const float* router_bias = nullptr;  // [n_experts], with config.expert_biases
  std::vector<ExpertWeights> experts;
};

// Scratch of one pass; grows as the pass needs.
struct MoeScratch {
  AlignedVector<float> logits, in, gate, up, out;
  std::vector<int32_t> chosen;  // [n, k] experts of each token, in increasing order
  std::vector<float> weight;    // [n, k] their weights
  std::vector<int64_t> row;     // [n, k] the row of each (token, choice) among the experts' rows
};

// The k experts of a token: the largest logits (the lower index first among
// equal ones), weighted by the softmax of those k logits (computed in double,
// rounded once), listed in increasing expert order, the order in which the
// token's outputs are summed, so that a token's bits depend on it alone.
void route_token(const float* logits, int n_experts, int k, int32_t* chosen, float* weight);

// out[t, :] = sum over t's experts e of weight * w_down_e · (act(w_gate_e · h[t]) * w_up_e · h[t]).
// h, out: [n, dim]. Each expert runs once over the rows routed to it.
void moe_mlp(const MoeWeights& w, const ModelConfig& c, const float* h, int64_t n, float* out, MoeScratch& s,
             ThreadPool& pool);

}  // namespace exactly
