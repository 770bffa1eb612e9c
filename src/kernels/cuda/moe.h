// A mixture-of-experts MLP on the GPU (Mixtral, Qwen3-MoE): each token's
// router logits pick its k experts, each (token, choice) becomes one row of
// its expert's group, every group's products run in one launch, and each
// token sums its experts' outputs.
//
// Batch invariance: a token's experts and weights depend on its logits
// alone; the experts' products sum each output in one fp32 accumulator fed
// by k16 tensor-core steps from k = 0 upwards (gemm.h's canonical order), so
// a row's bits depend on the row and its expert's weights alone, never on
// which rows share its group or where in the group it lands (rows are placed
// by atomics); and a token sums its experts' outputs in increasing expert
// order. So a request's bits never depend on the rest of the step.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/moe_limits.h"

namespace exactly::kernels::cuda {

// A step's routes, in device memory (moe_routes_bytes for n tokens).
struct MoeRoutes {
  int32_t* chosen;        // [n, k] each token's experts, increasing
  float* weight;          // [n, k] their weights: softmax of the chosen logits
  int32_t* row_of;        // [n, k] where each (token, choice) sits among the groups' rows
  int32_t* token_of_row;  // [n k] the token each row takes its input from
  int32_t* tiles;         // [moe_max_tiles, 3] (expert, first row, end row) of each tile
  int32_t* tile_count;    // [1]
};

// The most tiles n tokens' groups can need: each nonempty group rounds up once.
inline int64_t moe_max_tiles(int64_t n, int k, int n_experts) {
  const int64_t rows = n * k;
  return (rows + kMoeTileRows - 1) / kMoeTileRows + (rows < n_experts ? rows : n_experts);
}
size_t moe_routes_bytes(int64_t n, int k, int n_experts);
MoeRoutes moe_routes_at(void* base, int64_t n, int k, int n_experts);

// logits f32 [n, n_experts] -> r.chosen, r.weight (the k largest logits, the
// lower index first among equal ones; weights the softmax of those k,
// computed in double and rounded once), then the groups' rows and tiles.
void moe_route(const float* logits, int64_t n, int n_experts, int k, const MoeRoutes& r, cudaStream_t stream);

// out[row, :] = in[src(row), :] · w[e(row)]ᵀ for every row of every group,
// src(row) = r.token_of_row[row] when `gather`, else row. in bf16 [*, K], w
// bf16 [n_experts, N, K], out [n k, N] bf16 or f32. N a multiple of
// kMoeTileCols, K of kMoeTileK, rows 16-byte aligned.
struct MoeProducts {
  const void* in;
  bool gather;
  const void* w;
  void* out;
  GemmOut out_type;
  int64_t n;  // tokens
  int k;      // experts per token
  int n_experts;
  int64_t N, K;
};
void moe_products(const MoeProducts& p, const MoeRoutes& r, cudaStream_t stream);

// x[t, :] += sum over j of r.weight[t, j] * y[r.row_of[t, j], :], j increasing.
// y f32 [n k, dim], x f32 [n, dim].
void moe_combine(const float* y, const MoeRoutes& r, int64_t n, int k, int dim, float* x, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
