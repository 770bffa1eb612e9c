// What the kernels of exact_rows_attention share: their parameters, a CTA's
// group of 16 packed query rows (the query heads of one KV head, then the
// tokens of a short query), and the rows' Q fragments in the mma.m16n8k16
// A layout.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_params.h"
#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/mma_primitives.cuh"

namespace exactly::kernels::cuda {

using ExactRowsParams = PagedAttentionParams<__nv_bfloat16>;

// Rows row0 .. row0 + 15 of the packed rows of (sequence s, kv_head): packed
// row r is query token r / group, head kv_head * group + r % group.
struct RowGroup {
  int q0, q_len, ctx_len, rows, row0;
  __device__ RowGroup(const ExactRowsParams& p, int s, int group_index)
      : q0(p.query_start[s]),
        q_len(p.query_start[s + 1] - q0),
        ctx_len(p.seq_lens[s]),
        rows(q_len * p.group),
        row0(group_index * 16) {}
  __device__ bool empty() const { return row0 >= rows; }
  // The position of local row r (0-15): its token's place in the sequence.
  __device__ int position(const ExactRowsParams& p, int r) const { return ctx_len - q_len + (row0 + r) / p.group; }
  // Row r's D elements in q or out, or nullptr past the rows.
  template <typename T>
  __device__ T* row(T* base, const ExactRowsParams& p, int kv_head, int r, int D) const {
    const int packed = row0 + r;
    if (packed >= rows) return nullptr;
    return base + (int64_t{q0 + packed / p.group} * p.n_heads + kv_head * p.group + packed % p.group) * D;
  }
};

// The group's Q as A fragments of the k16 steps over D (rows g and g + 8).
template <int D>
__device__ __forceinline__ void load_q_fragments(uint32_t (&qf)[D / 16][4], const ExactRowsParams& p,
                                                 const RowGroup& rg, int kv_head, int lane) {
  const int g = lane / 4, c = lane % 4;
  const __nv_bfloat16* lo = rg.row(p.q, p, kv_head, g, D);
  const __nv_bfloat16* hi = rg.row(p.q, p, kv_head, g + 8, D);
  auto pair = [](const __nv_bfloat16* row, int col) -> uint32_t {
    return row == nullptr ? 0u : *reinterpret_cast<const uint32_t*>(row + col);
  };
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    qf[ks][0] = pair(lo, 16 * ks + 2 * c);
    qf[ks][1] = pair(hi, 16 * ks + 2 * c);
    qf[ks][2] = pair(lo, 16 * ks + 8 + 2 * c);
    qf[ks][3] = pair(hi, 16 * ks + 8 + 2 * c);
  }
}

// A tile's probabilities (accumulator layout, 128 keys) as the A fragments of
// the P V product's eight k16 steps, rounded to bf16.
__device__ __forceinline__ void pack_probabilities(const float (&sc)[64], uint32_t (&pk)[8][4]) {
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    pk[ks][0] = Elem<__nv_bfloat16>::pack(sc[8 * ks + 0], sc[8 * ks + 1]);
    pk[ks][1] = Elem<__nv_bfloat16>::pack(sc[8 * ks + 2], sc[8 * ks + 3]);
    pk[ks][2] = Elem<__nv_bfloat16>::pack(sc[8 * ks + 4], sc[8 * ks + 5]);
    pk[ks][3] = Elem<__nv_bfloat16>::pack(sc[8 * ks + 6], sc[8 * ks + 7]);
  }
}

}  // namespace exactly::kernels::cuda
