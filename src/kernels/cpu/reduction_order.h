// The single reduction order of every matmul output (and attention dot product).
//
// y = sum_k w[k] * x[k] is accumulated in 8 fp32 lanes: lane l holds the
// products of k = l, l+8, l+16, ... added in increasing k with one fused
// multiply-add each (lane = fma(w, x, lane), starting from +0). The 8 lanes are
// then folded by one fixed tree:
//   s_i = lane_i + lane_{i+4} (i < 4),  y = (s_0 + s_2) + (s_1 + s_3).
// Every path (scalar reference, fused decode, tiled GEMM) follows exactly this
// order, and the dequantised weights are bit-identical in all of them, so an
// output's bits never depend on the batch, the tile or the thread.
#pragma once

#include "kernels/cpu/simd.h"

namespace exactly::kernels::cpu {

constexpr int kLanes = 8;

inline float fold_lanes(const float* lanes) {  // lanes: [8]
  const float s0 = lanes[0] + lanes[4];
  const float s1 = lanes[1] + lanes[5];
  const float s2 = lanes[2] + lanes[6];
  const float s3 = lanes[3] + lanes[7];
  return (s0 + s2) + (s1 + s3);
}

#if EXACTLY_KERNELS_AVX2
inline float fold_lanes(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // s0..s3
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));  // [s0+s2, s1+s3, ..]
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
#endif

}  // namespace exactly::kernels::cpu
