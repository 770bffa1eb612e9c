// RMS normalisation. The sum of squares is accumulated in float64 in 4 lanes
// (lane i % 4, increasing i), folded as (l0 + l1) + (l2 + l3): squares of
// floats are exact in float64, so the SIMD and scalar versions agree bit for
// bit and the sum carries ~1e-16 relative error. The scale 1/sqrt(mean + eps)
// is computed in float64 and rounded once; out = (x * scale) * weight in fp32.
#include <cmath>

#include "kernels/cpu/simd.h"
#include "kernels/ops.h"

namespace exactly::kernels {

namespace {

float inverse_rms(const double* lanes, int64_t dim, float eps) {  // lanes: [4]
  const double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  return static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(dim) + static_cast<double>(eps)));
}

}  // namespace

void rmsnorm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * dim;
    float* ot = out + t * dim;
    alignas(32) double lanes[4] = {0, 0, 0, 0};
    int64_t i = 0;
#if EXACTLY_KERNELS_AVX2
    __m256d acc = _mm256_setzero_pd();
    for (; i + 4 <= dim; i += 4) {
      const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(xt + i));
      acc = _mm256_fmadd_pd(v, v, acc);  // exact product: same as acc + v * v
    }
    _mm256_store_pd(lanes, acc);
#endif
    for (; i < dim; ++i) lanes[i % 4] += static_cast<double>(xt[i]) * static_cast<double>(xt[i]);
    const float scale = inverse_rms(lanes, dim, eps);
    i = 0;
#if EXACTLY_KERNELS_AVX2
    const __m256 s = _mm256_set1_ps(scale);
    for (; i + 8 <= dim; i += 8)
      _mm256_storeu_ps(ot + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xt + i), s), _mm256_loadu_ps(weight + i)));
#endif
    for (; i < dim; ++i) ot[i] = (xt[i] * scale) * weight[i];
  }
}

namespace reference {
void rmsnorm(const float* x, const float* weight, int64_t n_tokens, int64_t dim, float eps, float* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * dim;
    double lanes[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < dim; ++i) lanes[i % 4] += static_cast<double>(xt[i]) * static_cast<double>(xt[i]);
    const float scale = inverse_rms(lanes, dim, eps);
    for (int64_t i = 0; i < dim; ++i) out[t * dim + i] = (xt[i] * scale) * weight[i];
  }
}
}  // namespace reference

}  // namespace exactly::kernels
