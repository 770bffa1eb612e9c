// The training backward, recomputing P = exp(scale * q k^T - lse) per tile:
//   D_i  = sum_d dO_i[d] * O_i[d]
//   dV_j = sum_i P_ij dO_i           dP_ij = dO_i . V_j
//   dS_ij = P_ij (dP_ij - D_i)
//   dK_j = scale * sum_i dS_ij Q_i   dQ_i = scale * sum_j dS_ij K_j
// Pass one owns a key tile of one KV head (summing over the group's query
// heads, then query tiles, in increasing order); pass two owns a query tile of
// one head (key tiles in increasing order). Each recomputes the tiles it
// needs, so neither writes into the other's outputs.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/flash_train.h"
#include "kernels/cpu/flash_train_tiles.h"

namespace exactly::kernels::cpu::train {

using detail::HeadRows;
using detail::SeqSpan;
using detail::Task;

namespace {

// The inputs of both passes, with the row strides of the two layouts.
template <typename T>
struct Inputs {
  const VarlenShape& shape;
  T scale;
  const T *q, *k, *v, *d_out, *lse, *delta;
  int64_t q_stride, k_stride;

  HeadRows<T> q_rows(const SeqSpan& s, int32_t head, int32_t row) const {
    return {q + (s.q0 + row) * q_stride + int64_t{head} * shape.head_dim, q_stride};
  }
  HeadRows<T> d_out_rows(const SeqSpan& s, int32_t head, int32_t row) const {
    return {d_out + (s.q0 + row) * q_stride + int64_t{head} * shape.head_dim, q_stride};
  }
  HeadRows<T> k_rows(const SeqSpan& s, int32_t kv_head, int32_t row) const {
    return {k + (s.k0 + row) * k_stride + int64_t{kv_head} * shape.head_dim, k_stride};
  }
  HeadRows<T> v_rows(const SeqSpan& s, int32_t kv_head, int32_t row) const {
    return {v + (s.k0 + row) * k_stride + int64_t{kv_head} * shape.head_dim, k_stride};
  }
};

// P and dS of one (query tile, key tile) pair of one head, and the partial
// sum of one gradient product over that pair.
template <typename T>
struct PairTiles {
  std::vector<T> p, ds, scratch, partial;
  explicit PairTiles(int head_dim)
      : p(kQueryTile * kKeyTile),
        ds(kQueryTile * kKeyTile),
        scratch(int64_t{head_dim} * kKeyTile),
        partial(int64_t{std::max(kQueryTile, kKeyTile)} * head_dim) {}

  // acc += the pair's product, summed within the pair first: two-level
  // summation keeps a gradient summed over N rows to O(N / tile) rounding
  // steps per element rather than O(N), in an order that is still fixed.
  template <typename Weight>
  void add_tile_sum(std::vector<T>& acc, int n_out, int head_dim, HeadRows<T> rows, int n_in, Weight w) {
    std::fill(partial.begin(), partial.begin() + int64_t{n_out} * head_dim, T(0));
    detail::accumulate_rows(partial.data(), n_out, n_in, head_dim, rows, w);
    for (int64_t i = 0; i < int64_t{n_out} * head_dim; ++i) acc[i] += partial[i];
  }
};

// Fills tiles.p and tiles.ds for queries q_start..+n_q of `head` against keys
// k_start..+n_k; entries a query does not see are 0.
template <typename T>
void recompute_pair(const Inputs<T>& in, const SeqSpan& s, int32_t head, int32_t q_start, int n_q, int32_t k_start,
                    int n_k, PairTiles<T>& tiles) {
  const int d = in.shape.head_dim;
  const int32_t kv_head = head / (in.shape.n_heads / in.shape.n_kv_heads);
  detail::dot_tile(in.q_rows(s, head, q_start), n_q, in.k_rows(s, kv_head, k_start), n_k, d, in.scale,
                   tiles.scratch.data(), tiles.p.data());
  detail::dot_tile(in.d_out_rows(s, head, q_start), n_q, in.v_rows(s, kv_head, k_start), n_k, d, T(1),
                   tiles.scratch.data(), tiles.ds.data());
  for (int r = 0; r < n_q; ++r) {
    const int64_t row = (s.q0 + q_start + r) * in.shape.n_heads + head;
    const int32_t seen = detail::visible_keys(s, in.shape.causal, q_start + r) - k_start;
    const T lse = in.lse[row], delta = in.delta[row];
    T* p = tiles.p.data() + r * kKeyTile;
    T* ds = tiles.ds.data() + r * kKeyTile;
    for (int c = 0; c < kKeyTile; ++c) {
      p[c] = (c < n_k && c < seen && std::isfinite(lse)) ? std::exp(p[c] - lse) : T(0);
      ds[c] = p[c] == T(0) ? T(0) : p[c] * (ds[c] - delta);
    }
  }
}

template <typename T>
void store_rows(const std::vector<T>& acc, int n_rows, int head_dim, T* dst, int64_t stride) {
  for (int r = 0; r < n_rows; ++r)
    std::copy_n(acc.data() + int64_t{r} * head_dim, head_dim, dst + r * stride);
}

// Pass one: dK and dV of keys task.start..+kKeyTile of KV head task.head.
template <typename T>
void key_tile_gradients(const Inputs<T>& in, const Task& task, Gradients<T> grads) {
  const SeqSpan s = detail::seq_span(in.shape, task.seq);
  const int d = in.shape.head_dim, group = in.shape.n_heads / in.shape.n_kv_heads;
  const int n_k = std::min(kKeyTile, s.lk - task.start);
  std::vector<T> dk(int64_t{kKeyTile} * d, T(0)), dv(int64_t{kKeyTile} * d, T(0));
  PairTiles<T> tiles(d);
  const int32_t first = detail::first_query_seeing(s, in.shape.causal, task.start);
  for (int32_t head = task.head * group; head < (task.head + 1) * group; ++head) {
    for (int32_t q_start = first / kQueryTile * kQueryTile; q_start < s.lq; q_start += kQueryTile) {
      const int n_q = std::min(kQueryTile, s.lq - q_start);
      recompute_pair(in, s, head, q_start, n_q, task.start, n_k, tiles);
      const T* p = tiles.p.data();
      const T* ds = tiles.ds.data();
      tiles.add_tile_sum(dv, n_k, d, in.d_out_rows(s, head, q_start), n_q,
                         [&](int c, int r) { return p[r * kKeyTile + c]; });
      tiles.add_tile_sum(dk, n_k, d, in.q_rows(s, head, q_start), n_q,
                         [&](int c, int r) { return ds[r * kKeyTile + c] * in.scale; });
    }
  }
  const int64_t at = (s.k0 + task.start) * in.k_stride + int64_t{task.head} * d;
  store_rows(dk, n_k, d, grads.dk + at, in.k_stride);
  store_rows(dv, n_k, d, grads.dv + at, in.k_stride);
}

// Pass two: dQ of queries task.start..+kQueryTile of head task.head.
template <typename T>
void query_tile_gradients(const Inputs<T>& in, const Task& task, Gradients<T> grads) {
  const SeqSpan s = detail::seq_span(in.shape, task.seq);
  const int d = in.shape.head_dim;
  const int32_t kv_head = task.head / (in.shape.n_heads / in.shape.n_kv_heads);
  const int n_q = std::min(kQueryTile, s.lq - task.start);
  const int32_t key_end = detail::visible_keys(s, in.shape.causal, task.start + n_q - 1);
  std::vector<T> dq(int64_t{kQueryTile} * d, T(0));
  PairTiles<T> tiles(d);
  for (int32_t k_start = 0; k_start < key_end; k_start += kKeyTile) {
    const int n_k = std::min(kKeyTile, s.lk - k_start);
    recompute_pair(in, s, task.head, task.start, n_q, k_start, n_k, tiles);
    const T* ds = tiles.ds.data();
    tiles.add_tile_sum(dq, n_q, d, in.k_rows(s, kv_head, k_start), n_k,
                       [&](int r, int c) { return ds[r * kKeyTile + c] * in.scale; });
  }
  store_rows(dq, n_q, d, grads.dq + (s.q0 + task.start) * in.q_stride + int64_t{task.head} * d, in.q_stride);
}

// D = rowsum(dO * O) per query row and head.
template <typename T>
std::vector<T> output_dot(const VarlenShape& shape, const T* out, const T* d_out, ThreadPool& pool) {
  const int64_t rows = int64_t{shape.n_seqs > 0 ? shape.cu_q[shape.n_seqs] : 0} * shape.n_heads;
  std::vector<T> delta(rows);
  pool.parallel_for(rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* o = out + r * shape.head_dim;
      const T* g = d_out + r * shape.head_dim;
      T sum = 0;
      for (int i = 0; i < shape.head_dim; ++i) sum += o[i] * g[i];
      delta[r] = sum;
    }
  });
  return delta;
}

template <typename Fn>
void run_tasks(ThreadPool& pool, const std::vector<Task>& tasks, Fn fn) {
  pool.parallel_for(static_cast<int64_t>(tasks.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) fn(tasks[t]);
  });
}

}  // namespace

template <typename T>
void flash_backward(const VarlenShape& shape, T scale, const T* q, const T* k, const T* v, const T* out,
                    const T* d_out, const T* lse, Gradients<T> grads, ThreadPool& pool) {
  validate(shape);
  const std::vector<T> delta = output_dot(shape, out, d_out, pool);
  const Inputs<T> in{shape, scale, q, k, v, d_out, lse, delta.data(), int64_t{shape.n_heads} * shape.head_dim,
                     int64_t{shape.n_kv_heads} * shape.head_dim};
  run_tasks(pool, detail::tile_tasks(shape, shape.n_kv_heads, kKeyTile, [](const SeqSpan& s) { return s.lk; }),
            [&](const Task& t) { key_tile_gradients(in, t, grads); });
  run_tasks(pool, detail::tile_tasks(shape, shape.n_heads, kQueryTile, [](const SeqSpan& s) { return s.lq; }),
            [&](const Task& t) { query_tile_gradients(in, t, grads); });
}

template void flash_backward<float>(const VarlenShape&, float, const float*, const float*, const float*,
                                    const float*, const float*, const float*, Gradients<float>, ThreadPool&);
template void flash_backward<double>(const VarlenShape&, double, const double*, const double*, const double*,
                                     const double*, const double*, const double*, Gradients<double>, ThreadPool&);

}  // namespace exactly::kernels::cpu::train
