// 2^x in fp32, the one exponential of the attention kernels (scores are kept
// in the log2 domain: q is pre-scaled by scale * log2(e)).
//
// x is split as n + r with n = round(x) and r = x - n, exact for |x| < 2^23,
// |r| <= 1/2; 2^r is a degree-7 Taylor polynomial in r (coefficients
// ln2^k / k!; truncation error < 6e-9 relative) evaluated by Horner with
// fused multiply-adds, and 2^n is put into the exponent bits. Measured maximum
// error over [-126, 127]: 1 ulp (tests/kernels/flash_exp2_test.cc holds it to
// that). Inputs below -126.5 (and -inf) give exactly +0, inputs in
// (-126.5, -126) give a subnormal; inputs above 127 are clamped.
//
// The scalar and the 8-lane versions perform the same operations in the same
// order, so they return the same bits for every input.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd.h"

namespace exactly::kernels::cpu {

namespace exp2_detail {
constexpr float kMin = -127.0f;  // rounds to n = -127: exponent field 0, result +0
constexpr float kMax = 127.0f;
constexpr float kC[8] = {1.0f,
                         0.693147180559945309f,
                         0.240226506959100712f,
                         0.0555041086648215800f,
                         0.00961812910762847716f,
                         0.00133335581464284434f,
                         0.000154035303933816099f,
                         0.0000152527338040598403f};
}  // namespace exp2_detail

inline float exp2_fast(float x) {
  using namespace exp2_detail;
  x = std::fmin(std::fmax(x, kMin), kMax);
  const float n = std::nearbyint(x);
  const float r = x - n;
  float p = kC[7];
  for (int k = 6; k >= 0; --k) p = std::fma(p, r, kC[k]);
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

#if EXACTLY_KERNELS_AVX2
inline __m256 exp2_fast(__m256 x) {
  using namespace exp2_detail;
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kMin)), _mm256_set1_ps(kMax));
  const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_sub_ps(x, n);
  __m256 p = _mm256_set1_ps(kC[7]);
  for (int k = 6; k >= 0; --k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC[k]));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}
#endif

}  // namespace exactly::kernels::cpu
