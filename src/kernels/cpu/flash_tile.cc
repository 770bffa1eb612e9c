// Micro-kernels of one KV tile (see flash_tile.h for the reduction order).
// The AVX2 paths and the scalar paths perform the same operations on every
// element in the same order; they differ only in how many elements they do at
// once, so a row's bits never depend on which path or row block it went through.
#include "kernels/cpu/flash_tile.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/flash_exp2.h"
#include "kernels/cpu/reduction_order.h"

namespace exactly::kernels::cpu::flash {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

#if EXACTLY_KERNELS_AVX2
// Writes the transpose of the 8x8 block rows[i][0..7] to out[i' * stride + i].
void transpose8x8(const float* const* rows, int d0, float* out, int stride) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(rows[i] + d0);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {
    r[h + 0] = _mm256_shuffle_ps(t[h + 0], t[h + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[h + 1] = _mm256_shuffle_ps(t[h + 0], t[h + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(out + i * stride, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(out + (i + 4) * stride, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
#endif

// kt[d, j] = keys[j][d] for j < n_keys, 0 beyond (those scores are masked).
void pack_keys_transposed(const float* const* keys, int n_keys, int hd, float* kt) {  // kt: [hd, kKeyTile]
#if EXACTLY_KERNELS_AVX2
  if (n_keys == kKeyTile && hd % 8 == 0) {
    for (int j0 = 0; j0 < kKeyTile; j0 += 8)
      for (int d0 = 0; d0 < hd; d0 += 8) transpose8x8(keys + j0, d0, kt + d0 * kKeyTile + j0, kKeyTile);
    return;
  }
#endif
  for (int d = 0; d < hd; ++d)
    for (int j = 0; j < kKeyTile; ++j) kt[d * kKeyTile + j] = j < n_keys ? keys[j][d] : 0.0f;
}

// scores[r, j] = sum_d qs[r, d] * kt[d, j] as one fma chain in increasing d.
template <int NR>
void score_rows(const float* qs, int hd, const float* kt, float* scores) {  // qs: [NR, hd]; scores: [NR, kKeyTile]
#if EXACTLY_KERNELS_AVX2
  __m256 a[NR][2];
  for (int i = 0; i < NR; ++i) a[i][0] = a[i][1] = _mm256_setzero_ps();
  for (int d = 0; d < hd; ++d) {
    const __m256 k0 = _mm256_loadu_ps(kt + d * kKeyTile), k1 = _mm256_loadu_ps(kt + d * kKeyTile + 8);
    for (int i = 0; i < NR; ++i) {
      const __m256 qb = _mm256_broadcast_ss(qs + i * hd + d);
      a[i][0] = _mm256_fmadd_ps(qb, k0, a[i][0]);
      a[i][1] = _mm256_fmadd_ps(qb, k1, a[i][1]);
    }
  }
  for (int i = 0; i < NR; ++i) {
    _mm256_storeu_ps(scores + i * kKeyTile, a[i][0]);
    _mm256_storeu_ps(scores + i * kKeyTile + 8, a[i][1]);
  }
#else
  for (int i = 0; i < NR; ++i)
    for (int j = 0; j < kKeyTile; ++j) {
      float s = 0.0f;
      for (int d = 0; d < hd; ++d) s = std::fma(qs[i * hd + d], kt[d * kKeyTile + j], s);
      scores[i * kKeyTile + j] = s;
    }
#endif
}

// acc[d] *= c for all d.
void scale_row(float* acc, float c, int hd) {  // acc: [hd]
  int d = 0;
#if EXACTLY_KERNELS_AVX2
  const __m256 cv = _mm256_set1_ps(c);
  for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), cv));
#endif
  for (; d < hd; ++d) acc[d] *= c;
}

// Turns one row of scores into probabilities p = exp2(score - m_new), masking
// keys outside [first_valid, n_valid), and updates m, l and the scale of acc.
void softmax_row(float* s, int first_valid, int n_valid, float& m, float& l, float* acc,
                 int hd) {  // s: [kKeyTile]; acc: [hd]
#if EXACTLY_KERNELS_AVX2
  const __m256 neg_inf = _mm256_set1_ps(kNegInf), nv = _mm256_set1_ps(static_cast<float>(n_valid));
  const __m256 fv = _mm256_set1_ps(static_cast<float>(first_valid));
  const __m256 idx0 = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), idx1 = _mm256_add_ps(idx0, _mm256_set1_ps(8));
  const __m256 in0 = _mm256_and_ps(_mm256_cmp_ps(idx0, nv, _CMP_LT_OQ), _mm256_cmp_ps(idx0, fv, _CMP_GE_OQ));
  const __m256 in1 = _mm256_and_ps(_mm256_cmp_ps(idx1, nv, _CMP_LT_OQ), _mm256_cmp_ps(idx1, fv, _CMP_GE_OQ));
  const __m256 s0 = _mm256_blendv_ps(neg_inf, _mm256_loadu_ps(s), in0);
  const __m256 s1 = _mm256_blendv_ps(neg_inf, _mm256_loadu_ps(s + 8), in1);
  __m256 mx = _mm256_max_ps(s0, s1);
  mx = _mm256_max_ps(mx, _mm256_permute2f128_ps(mx, mx, 1));
  mx = _mm256_max_ps(mx, _mm256_shuffle_ps(mx, mx, _MM_SHUFFLE(1, 0, 3, 2)));
  mx = _mm256_max_ps(mx, _mm256_shuffle_ps(mx, mx, _MM_SHUFFLE(2, 3, 0, 1)));
  const float m_new = std::max(m, _mm256_cvtss_f32(mx));
  const __m256 mv = _mm256_set1_ps(m_new);
  const __m256 p0 = exp2_fast(_mm256_sub_ps(s0, mv)), p1 = exp2_fast(_mm256_sub_ps(s1, mv));
  _mm256_storeu_ps(s, p0);
  _mm256_storeu_ps(s + 8, p1);
  const float tile_sum = fold_lanes(_mm256_add_ps(p0, p1));
#else
  for (int j = 0; j < kKeyTile; ++j)
    if (j < first_valid || j >= n_valid) s[j] = kNegInf;
  float tile_max = kNegInf;
  for (int j = 0; j < kKeyTile; ++j) tile_max = std::max(tile_max, s[j]);
  const float m_new = std::max(m, tile_max);
  for (int j = 0; j < kKeyTile; ++j) s[j] = exp2_fast(s[j] - m_new);
  float lanes[kLanes];
  for (int i = 0; i < kLanes; ++i) lanes[i] = s[i] + s[i + kLanes];
  const float tile_sum = fold_lanes(lanes);
#endif
  const float c = exp2_fast(m - m_new);
  l = l * c + tile_sum;
  if (c != 1.0f) scale_row(acc, c, hd);
  m = m_new;
}

// acc_i[d] = fma(p_i[j], v[j][d], acc_i[d]) for j < n_valid in order, for NR
// rows sharing the values; the accumulators of NV*8 dims stay in registers.
template <int NR, int NV>
void accumulate_chunk(float* const* acc, const float* const* p, const float* const* v, int n_valid, int d0) {
#if EXACTLY_KERNELS_AVX2
  __m256 a[NR][NV];
  for (int r = 0; r < NR; ++r)
    for (int i = 0; i < NV; ++i) a[r][i] = _mm256_loadu_ps(acc[r] + d0 + 8 * i);
  for (int j = 0; j < n_valid; ++j) {
    __m256 vv[NV];
    for (int i = 0; i < NV; ++i) vv[i] = _mm256_loadu_ps(v[j] + d0 + 8 * i);
    for (int r = 0; r < NR; ++r) {
      const __m256 pb = _mm256_broadcast_ss(p[r] + j);
      for (int i = 0; i < NV; ++i) a[r][i] = _mm256_fmadd_ps(pb, vv[i], a[r][i]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int i = 0; i < NV; ++i) _mm256_storeu_ps(acc[r] + d0 + 8 * i, a[r][i]);
#else
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < n_valid; ++j)
      for (int d = d0; d < d0 + NV * 8; ++d) acc[r][d] = std::fma(p[r][j], v[j][d], acc[r][d]);
#endif
}

template <int NR>
void accumulate_rows(float* const* acc, const float* const* p, const float* const* v, int n_valid, int hd) {
  int d = 0;
  for (; d + 32 <= hd; d += 32) accumulate_chunk<NR, 4>(acc, p, v, n_valid, d);
  for (; d + 8 <= hd; d += 8) accumulate_chunk<NR, 1>(acc, p, v, n_valid, d);
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < n_valid; ++j)
      for (int e = d; e < hd; ++e) acc[r][e] = std::fma(p[r][j], v[j][e], acc[r][e]);
}

}  // namespace

void attend_kv_tile(const float* qs, int n_rows, int hd, const int32_t* n_valid, const int32_t* first_valid,
                    const float* const* keys, const float* const* values, int n_keys, TileScratch scratch,
                    RowState state) {
  pack_keys_transposed(keys, n_keys, hd, scratch.k_transposed);
  int r = 0;
  for (; r + 4 <= n_rows; r += 4) score_rows<4>(qs + r * hd, hd, scratch.k_transposed, scratch.scores + r * kKeyTile);
  for (; r < n_rows; ++r) score_rows<1>(qs + r * hd, hd, scratch.k_transposed, scratch.scores + r * kKeyTile);

  for (r = 0; r < n_rows; ++r)
    if (n_valid[r] > 0)
      softmax_row(scratch.scores + r * kKeyTile, first_valid ? first_valid[r] : 0, n_valid[r], state.m[r],
                  state.l[r], state.acc + r * hd, hd);

  // Rows with the same number of valid keys share the loads of the values
  // (masked keys have p = 0: fma(0, v, acc) leaves acc as it is).
  for (r = 0; r < n_rows;) {
    const int nv = n_valid[r];
    if (nv == 0) {
      ++r;
      continue;
    }
    float* acc[2] = {state.acc + r * hd, state.acc + (r + 1) * hd};
    const float* p[2] = {scratch.scores + r * kKeyTile, scratch.scores + (r + 1) * kKeyTile};
    if (r + 1 < n_rows && n_valid[r + 1] == nv) {
      accumulate_rows<2>(acc, p, values, nv, hd);
      r += 2;
    } else {
      accumulate_rows<1>(acc, p, values, nv, hd);
      ++r;
    }
  }
}

}  // namespace exactly::kernels::cpu::flash
