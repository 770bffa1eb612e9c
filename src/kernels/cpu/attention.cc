// Causal attention over the paged KV cache, one (query token, head) at a time.
//
// Keys are visited in tiles of kKeyTile positions in increasing order with an
// online softmax at tile granularity (running max m, running sum l, and an
// accumulator rescaled by exp(m_old - m_new)), so scratch does not grow with
// the context and each output's arithmetic depends only on its own query and
// keys: the result is independent of the batch and of the thread split. The
// tile loop is the shape a FlashAttention prefill and split-KV decode extend.
#include <cmath>
#include <limits>

#include "kernels/cpu/attention_layout.h"
#include "kernels/cpu/reduction_order.h"
#include "kernels/ops.h"

namespace exactly::kernels {

namespace {

constexpr int kKeyTile = 16;
constexpr int kMaxHeadDim = 512;

// q . k in the matmul's reduction order (8 fp32 lanes of FMAs, fixed fold).
float dot(const float* q, const float* k, int n) {  // q, k: [n]
  int i = 0;
  float lanes[cpu::kLanes] = {};
#if EXACTLY_KERNELS_AVX2
  __m256 acc = _mm256_setzero_ps();
  for (; i + cpu::kLanes <= n; i += cpu::kLanes)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), acc);
  _mm256_storeu_ps(lanes, acc);
#endif
  for (; i < n; ++i) lanes[i % cpu::kLanes] = std::fma(q[i], k[i], lanes[i % cpu::kLanes]);
  return cpu::fold_lanes(lanes);
}

// Four dots q . k_i at once (independent chains overlap their FMA latency);
// each follows the same order as dot().
void dot4(const float* q, const float* const* k, int n, float* out) {  // q, k[i]: [n]; out: [4]
#if EXACTLY_KERNELS_AVX2
  if (n % cpu::kLanes == 0) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < n; i += cpu::kLanes) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[0] + i), a0);
      a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[1] + i), a1);
      a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[2] + i), a2);
      a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[3] + i), a3);
    }
    out[0] = cpu::fold_lanes(a0);
    out[1] = cpu::fold_lanes(a1);
    out[2] = cpu::fold_lanes(a2);
    out[3] = cpu::fold_lanes(a3);
    return;
  }
#endif
  for (int i = 0; i < 4; ++i) out[i] = dot(q, k[i], n);
}

// acc[d] = acc[d] * scale for all d.
void scale_row(float* acc, float scale, int n) {  // acc: [n]
  int i = 0;
#if EXACTLY_KERNELS_AVX2
  const __m256 s = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), s));
#endif
  for (; i < n; ++i) acc[i] *= scale;
}

// acc[d] = fma(p, v[d], acc[d]) for all d.
void axpy(float* acc, float p, const float* v, int n) {  // acc, v: [n]
  int i = 0;
#if EXACTLY_KERNELS_AVX2
  const __m256 pv = _mm256_set1_ps(p);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(pv, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
#endif
  for (; i < n; ++i) acc[i] = std::fma(p, v[i], acc[i]);
}

// acc[d] = fma(p[j], v[j][d], acc[d]) for j = 0..nk-1 in order, for all d:
// the same elementwise operations as axpy() per key, but with the accumulator
// held in registers across the tile (V = head_dim / 8 vectors).
template <int V>
void accumulate_tile(float* acc, const float* p, const float* const* v, int nk) {  // acc: [V*8]; v[j]: [V*8]
#if EXACTLY_KERNELS_AVX2
  __m256 a[V];
  for (int i = 0; i < V; ++i) a[i] = _mm256_loadu_ps(acc + 8 * i);
  for (int j = 0; j < nk; ++j) {
    const __m256 pv = _mm256_set1_ps(p[j]);
    for (int i = 0; i < V; ++i) a[i] = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v[j] + 8 * i), a[i]);
  }
  for (int i = 0; i < V; ++i) _mm256_storeu_ps(acc + 8 * i, a[i]);
#else
  for (int j = 0; j < nk; ++j) axpy(acc, p[j], v[j], V * 8);
#endif
}

void attend_one(const PagedKV& c, const AttentionBatch& b, cpu::QueryPlace place, int kv_head,
                const float* q,  // [head_dim]
                float scale,
                float* out) {  // [head_dim]
  const int hd = c.head_dim;
  float acc[kMaxHeadDim] = {};  // [head_dim] unnormalised output
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  const int32_t n_keys = place.pos + 1;
  for (int32_t j0 = 0; j0 < n_keys; j0 += kKeyTile) {
    const int nk = std::min(kKeyTile, n_keys - j0);
    float s[kKeyTile];  // [nk] scaled scores of this tile
    float tile_max = -std::numeric_limits<float>::infinity();
    int j = 0;
    for (; j + 4 <= nk; j += 4) {
      const float* k4[4];
      for (int i = 0; i < 4; ++i) k4[i] = c.k + cpu::kv_offset(c, b, place.seq, j0 + j + i, kv_head);
      dot4(q, k4, hd, s + j);
    }
    for (; j < nk; ++j) s[j] = dot(q, c.k + cpu::kv_offset(c, b, place.seq, j0 + j, kv_head), hd);
    for (j = 0; j < nk; ++j) {
      s[j] *= scale;
      tile_max = std::max(tile_max, s[j]);
    }
    const float m_new = std::max(m, tile_max);
    const float correction = std::exp(m - m_new);  // 0 on the first tile
    l *= correction;
    scale_row(acc, correction, hd);
    float p[kKeyTile];         // [nk] unnormalised probabilities
    const float* v[kKeyTile];  // [nk] value rows
    for (j = 0; j < nk; ++j) {
      p[j] = std::exp(s[j] - m_new);
      l += p[j];
      v[j] = c.v + cpu::kv_offset(c, b, place.seq, j0 + j, kv_head);
    }
    if (hd == 64) {
      accumulate_tile<8>(acc, p, v, nk);
    } else if (hd == 128) {
      accumulate_tile<16>(acc, p, v, nk);
    } else {
      for (j = 0; j < nk; ++j) axpy(acc, p[j], v[j], hd);
    }
    m = m_new;
  }
  const float inv_l = 1.0f / l;
  for (int d = 0; d < hd; ++d) out[d] = acc[d] * inv_l;
}

}  // namespace

void attention(const PagedKV& cache, const AttentionBatch& batch, const float* q, int n_heads, float scale,
               float* out, ThreadPool& pool) {
  cpu::check_attention(cache, batch, n_heads);
  EXACTLY_CHECK(cache.head_dim <= kMaxHeadDim, "attention: head_dim %d > %d", cache.head_dim, kMaxHeadDim);
  const int64_t n_tokens = batch.query_start[batch.n_seqs];
  const int group = n_heads / cache.n_kv_heads;
  const int64_t hd = cache.head_dim;
  pool.parallel_for(n_tokens * n_heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t = i / n_heads;
      const int h = static_cast<int>(i % n_heads);
      attend_one(cache, batch, cpu::place_query(batch, t), h / group, q + i * hd, scale, out + i * hd);
    }
  });
}

}  // namespace exactly::kernels
