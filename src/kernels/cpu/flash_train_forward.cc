// The training forward: FlashAttention's online softmax over key tiles, one
// task per (sequence, query head, query tile), saving each row's LSE.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/flash_train.h"
#include "kernels/cpu/flash_train_tiles.h"

namespace exactly::kernels::cpu::train {

using detail::HeadRows;
using detail::SeqSpan;

void validate(const VarlenShape& shape) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("flash attention: " + what); };
  if (shape.n_seqs < 0) fail("n_seqs must be >= 0, got " + std::to_string(shape.n_seqs));
  if (shape.n_seqs > 0 && (shape.cu_q == nullptr || shape.cu_k == nullptr)) fail("cu_q and cu_k are required");
  if (shape.head_dim < 1 || shape.head_dim > kMaxHeadDim)
    fail("head_dim must be in [1, " + std::to_string(kMaxHeadDim) + "], got " + std::to_string(shape.head_dim));
  if (shape.n_kv_heads < 1 || shape.n_heads < 1 || shape.n_heads % shape.n_kv_heads != 0)
    fail("n_heads (" + std::to_string(shape.n_heads) + ") must be a positive multiple of n_kv_heads (" +
         std::to_string(shape.n_kv_heads) + ")");
  if (shape.n_seqs == 0) return;
  if (shape.cu_q[0] != 0 || shape.cu_k[0] != 0) fail("cu_q[0] and cu_k[0] must be 0");
  for (int32_t s = 0; s < shape.n_seqs; ++s) {
    if (shape.cu_q[s + 1] < shape.cu_q[s]) fail("cu_q decreases at sequence " + std::to_string(s));
    if (shape.cu_k[s + 1] < shape.cu_k[s]) fail("cu_k decreases at sequence " + std::to_string(s));
  }
}

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One query tile's running softmax state: max m, sum l, unnormalised acc.
template <typename T>
struct OnlineSoftmax {
  std::vector<T> m, l, acc, scores, key_t;
  explicit OnlineSoftmax(int head_dim)
      : m(kQueryTile, T(kNegInf)),
        l(kQueryTile, T(0)),
        acc(int64_t{kQueryTile} * head_dim, T(0)),
        scores(kQueryTile * kKeyTile),
        key_t(int64_t{head_dim} * kKeyTile) {}
};

// Folds keys c0..c0+n_keys-1 into row r, which sees `visible` keys in all.
template <typename T>
void fold_row(OnlineSoftmax<T>& st, int r, int c0, int n_keys, int32_t visible, HeadRows<T> values, int head_dim) {
  const int n = std::min<int32_t>(n_keys, visible - c0);
  if (n <= 0) return;
  const T* s = st.scores.data() + r * kKeyTile;
  T m_new = st.m[r];
  for (int c = 0; c < n; ++c) m_new = std::max(m_new, s[c]);
  if (m_new == T(kNegInf)) return;  // only infinite inputs get here; they add nothing
  const T correction = std::exp(st.m[r] - m_new);  // exp(-inf) = 0 on the first tile
  T* a = st.acc.data() + int64_t{r} * head_dim;
  T sum = 0;
  for (int d = 0; d < head_dim; ++d) a[d] *= correction;
  for (int c = 0; c < n; ++c) {
    const T p = std::exp(s[c] - m_new);
    sum += p;
    const T* v = values.row(c0 + c);
    for (int d = 0; d < head_dim; ++d) a[d] += p * v[d];
  }
  st.l[r] = st.l[r] * correction + sum;
  st.m[r] = m_new;
}

template <typename T>
void forward_tile(const VarlenShape& shape, T scale, const T* q, const T* k, const T* v, T* out, T* lse,
                  const detail::Task& task) {
  const SeqSpan seq = detail::seq_span(shape, task.seq);
  const int d = shape.head_dim, group = shape.n_heads / shape.n_kv_heads;
  const int n_rows = std::min(kQueryTile, seq.lq - task.start);
  const int64_t q_stride = int64_t{shape.n_heads} * d, k_stride = int64_t{shape.n_kv_heads} * d;
  const int64_t kv_off = seq.k0 * k_stride + int64_t{task.head / group} * d;
  const HeadRows<T> queries{q + (seq.q0 + task.start) * q_stride + int64_t{task.head} * d, q_stride};
  const HeadRows<T> keys{k + kv_off, k_stride}, values{v + kv_off, k_stride};
  int32_t visible[kQueryTile];
  for (int r = 0; r < n_rows; ++r) visible[r] = detail::visible_keys(seq, shape.causal, task.start + r);
  const int32_t key_end = *std::max_element(visible, visible + n_rows);

  OnlineSoftmax<T> st(d);
  for (int c0 = 0; c0 < key_end; c0 += kKeyTile) {
    const int n_keys = std::min(kKeyTile, key_end - c0);
    detail::dot_tile(queries, n_rows, HeadRows<T>{keys.row(c0), k_stride}, n_keys, d, scale, st.key_t.data(),
                     st.scores.data());
    for (int r = 0; r < n_rows; ++r) fold_row(st, r, c0, n_keys, visible[r], values, d);
  }
  for (int r = 0; r < n_rows; ++r) {
    const int64_t row = seq.q0 + task.start + r;
    T* o = out + row * q_stride + int64_t{task.head} * d;
    const T* a = st.acc.data() + int64_t{r} * d;
    const bool any = st.l[r] > T(0);
    for (int i = 0; i < d; ++i) o[i] = any ? a[i] / st.l[r] : T(0);
    lse[row * shape.n_heads + task.head] = any ? st.m[r] + std::log(st.l[r]) : T(kNegInf);
  }
}

}  // namespace

template <typename T>
void flash_forward(const VarlenShape& shape, T scale, const T* q, const T* k, const T* v, T* out, T* lse,
                   ThreadPool& pool) {
  validate(shape);
  const auto tasks = detail::tile_tasks(shape, shape.n_heads, kQueryTile, [](const SeqSpan& s) { return s.lq; });
  pool.parallel_for(static_cast<int64_t>(tasks.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) forward_tile(shape, scale, q, k, v, out, lse, tasks[t]);
  });
}

template void flash_forward<float>(const VarlenShape&, float, const float*, const float*, const float*, float*,
                                   float*, ThreadPool&);
template void flash_forward<double>(const VarlenShape&, double, const double*, const double*, const double*,
                                    double*, double*, ThreadPool&);

}  // namespace exactly::kernels::cpu::train
