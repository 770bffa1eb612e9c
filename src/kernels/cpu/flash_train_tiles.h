// The pieces the training forward and backward share: which keys a query
// sees, the tasks each pass runs, and the two tile products. Every product
// reduces over head_dim in increasing order from +0 (multiplies and adds kept
// separate: the kernels build with -ffp-contract=off), with the key index
// innermost so the loops vectorise without reordering any sum.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/flash_train.h"

namespace exactly::kernels::cpu::train::detail {

// One sequence's rows in the flattened batch.
struct SeqSpan {
  int64_t q0, k0;  // first query row, first key row
  int32_t lq, lk;  // query and key counts
};

inline SeqSpan seq_span(const VarlenShape& shape, int32_t s) {
  return {shape.cu_q[s], shape.cu_k[s], shape.cu_q[s + 1] - shape.cu_q[s], shape.cu_k[s + 1] - shape.cu_k[s]};
}

// Keys 0..visible_keys-1 of its sequence are what query i sees.
inline int32_t visible_keys(const SeqSpan& seq, bool causal, int32_t i) {
  if (!causal) return seq.lk;
  return static_cast<int32_t>(std::clamp<int64_t>(int64_t{i} + seq.lk - seq.lq + 1, 0, seq.lk));
}

// The first query that sees key j (lq when none does).
inline int32_t first_query_seeing(const SeqSpan& seq, bool causal, int32_t j) {
  if (!causal) return seq.lk > j ? 0 : seq.lq;
  return static_cast<int32_t>(std::clamp<int64_t>(int64_t{j} - seq.lk + seq.lq, 0, seq.lq));
}

// A tile of work: rows start..start+tile-1 (queries or keys) of one head of
// one sequence.
struct Task {
  int32_t seq, head, start;
};

// Tasks over every sequence, head and tile of `rows_of(seq)` rows, in order.
template <typename RowsOf>
std::vector<Task> tile_tasks(const VarlenShape& shape, int32_t heads, int32_t tile, RowsOf rows_of) {
  std::vector<Task> tasks;
  for (int32_t s = 0; s < shape.n_seqs; ++s) {
    const int32_t rows = rows_of(seq_span(shape, s));
    for (int32_t h = 0; h < heads; ++h)
      for (int32_t start = 0; start < rows; start += tile) tasks.push_back({s, h, start});
  }
  return tasks;
}

// Rows of one head: row i at base + i * stride, head_dim elements each.
template <typename T>
struct HeadRows {
  const T* base;
  int64_t stride;
  const T* row(int64_t i) const { return base + i * stride; }
};

// out[r][c] = scale * sum_d a.row(r)[d] * b.row(c)[d] for r < n_a, c < n_b
// (out has kKeyTile columns; b_t is scratch of head_dim * kKeyTile).
template <typename T>
void dot_tile(HeadRows<T> a, int n_a, HeadRows<T> b, int n_b, int head_dim, T scale, T* b_t, T* out) {
  for (int c = 0; c < n_b; ++c)
    for (int d = 0; d < head_dim; ++d) b_t[d * kKeyTile + c] = b.row(c)[d];
  for (int r = 0; r < n_a; ++r) {
    T* o = out + r * kKeyTile;
    std::fill(o, o + kKeyTile, T(0));
    const T* x = a.row(r);
    for (int d = 0; d < head_dim; ++d) {
      const T* col = b_t + d * kKeyTile;
      for (int c = 0; c < n_b; ++c) o[c] += x[d] * col[c];
    }
    for (int c = 0; c < n_b; ++c) o[c] *= scale;
  }
}

// acc[i][d] += sum over j in increasing order of w(i, j) * rows.row(j)[d],
// the accumulate step of every gradient product.
template <typename T, typename Weight>
void accumulate_rows(T* acc, int n_out, int n_in, int head_dim, HeadRows<T> rows, Weight w) {
  for (int i = 0; i < n_out; ++i) {
    T* a = acc + int64_t{i} * head_dim;
    for (int j = 0; j < n_in; ++j) {
      const T wij = w(i, j);
      if (wij == T(0)) continue;
      const T* x = rows.row(j);
      for (int d = 0; d < head_dim; ++d) a[d] += wij * x[d];
    }
  }
}

}  // namespace exactly::kernels::cpu::train::detail
