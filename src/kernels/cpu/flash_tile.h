// The inner step of FlashAttention on the CPU: one KV tile of kKeyTile keys
// against the rows of a query tile (the query heads of one KV group for a run
// of query tokens), with the online softmax update of each row's running
// max m, sum l and unnormalised output acc.
//
// Per-row reduction order (the same for every row whatever its tile, so a row
// gets the same bits alone, in a batch, in a prefill chunk or in a decode step):
//   score[j] = fma chain over d = 0..head_dim-1 of qs[d] * k_j[d], from +0
//   masked keys (j >= the row's valid count, or j < its first valid key under
//   a sliding window) score -inf, so their p is 0
//   m_new = max(m, max_j score[j]);  c = exp2(m - m_new)
//   p[j] = exp2(score[j] - m_new);   l = l * c + fold(p[0..7] + p[8..15])
//   acc = acc * c (skipped when c == 1, which changes no bits), then
//   acc = fma(p[j], v_j, acc) for valid j in increasing order.
#pragma once

#include <cstdint>

namespace exactly::kernels::cpu::flash {

constexpr int kKeyTile = 16;  // keys per KV tile; split-KV partitions are a multiple of it

// Row state of the online softmax over one run of keys.
struct RowState {
  float* m;    // [n_rows] running max of the (log2-domain) scores
  float* l;    // [n_rows] running sum of exp2(score - m)
  float* acc;  // [n_rows, head_dim] running sum of exp2(score - m) * v
};

// Scratch of one call to attend_kv_tile.
struct TileScratch {
  float* k_transposed;  // [head_dim, kKeyTile]
  float* scores;        // [n_rows, kKeyTile]
};

// Updates the state of every row r with n_valid[r] > 0 by keys
// first_valid[r]..n_valid[r]-1 of the tile (first_valid null: from 0; rows
// need first_valid[r] < n_valid[r] when n_valid[r] > 0). keys, values:
// [n_keys] pointers to rows of head_dim floats (n_keys >= max n_valid; the
// pointers past n_keys are not read). qs: [n_rows, head_dim] queries already
// multiplied by scale * log2(e).
void attend_kv_tile(const float* qs, int n_rows, int head_dim, const int32_t* n_valid, const int32_t* first_valid,
                    const float* const* keys, const float* const* values, int n_keys, TileScratch scratch,
                    RowState state);

}  // namespace exactly::kernels::cpu::flash
