// e^x in fp32 for the SwiGLU gate, 8 lanes at a time. libm's expf is a
// scalar call per element: in a prompt's forward it was 5% of the CPU's time
// (silu_mul and expf in `perf`), more than the attention.
//
// x = n ln2 + r with n = round(x log2 e) and r from a two-part ln 2 (the high
// part has few enough bits that n * ln2_hi is exact, so |r| <= ln2 / 2 up to
// one rounding); e^r is the degree-7 Taylor polynomial (truncation below 6e-9
// relative), by Horner with fused multiply-adds; 2^n is applied as two
// powers of two, 2^(n >> 1) and 2^(n - (n >> 1)), so that results down to the
// subnormals and up to the overflow to +inf come out of the multiplies as an
// exact expf's would. Inputs are clamped to [-104, 88.75] first (beyond
// them e^x is +0 or +inf in fp32 anyway); NaN gives NaN. Measured error: at
// most 1 ulp (0.93 on a grid of 2^-16 over [-104, 88.7]; tests/kernels/exp_fast_test.cc).
//
// The scalar and the 8-lane versions perform the same operations in the same
// order, so they return the same bits for every input.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd.h"

namespace exactly::kernels::cpu {

namespace exp_detail {
constexpr float kMin = -104.0f;
constexpr float kMax = 88.75f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;  // 0x3f317200: 16 significant bits
constexpr float kLn2Lo = 1.42860682030941723212e-6f;
constexpr float kC[8] = {1.0f,          1.0f,           0.5f,           1.0f / 6,
                         1.0f / 24,     1.0f / 120,     1.0f / 720,     1.0f / 5040};

inline float power_of_two(int32_t n) {  // n in [-126, 127]
  const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
}  // namespace exp_detail

inline float exp_fast(float x) {
  using namespace exp_detail;
  if (std::isnan(x)) return x;
  x = std::fmin(std::fmax(x, kMin), kMax);
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(-n, kLn2Hi, x);
  r = std::fma(-n, kLn2Lo, r);
  float p = kC[7];
  for (int k = 6; k >= 0; --k) p = std::fma(p, r, kC[k]);
  const auto ni = static_cast<int32_t>(n);
  const int32_t half = ni >> 1;  // arithmetic shift: floor(n / 2)
  return p * power_of_two(half) * power_of_two(ni - half);
}

#if EXACTLY_KERNELS_AVX2
inline __m256 exp_fast(__m256 x) {
  using namespace exp_detail;
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kMin)), _mm256_set1_ps(kMax));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kC[7]);
  for (int k = 6; k >= 0; --k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC[k]));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), bias), 23));
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  return _mm256_blendv_ps(e, x, nan);
}
#endif

}  // namespace exactly::kernels::cpu
