// SwiGLU and GeGLU gates (silu(gate) * up, gelu_tanh(gate) * up), gpt-oss's
// clamped SwiGLU and the residual add.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/exp_fast.h"
#include "kernels/ops.h"

namespace exactly::kernels {

namespace {
// The 8-lane loop and the scalar tail compute the same bits (exp_fast.h), so
// an element's value never depends on where a chunk of the pool starts.
inline float silu(float g) { return g / (1.0f + cpu::exp_fast(-g)); }

// gelu_tanh(g) = 0.5 g (1 + tanh(u)), u = sqrt(2/pi) (g + 0.044715 g^3),
// computed as g / (1 + exp(-2u)) (the same function: 1 + tanh(u) is
// 2 / (1 + exp(-2u))), with the operations in this order in both paths.
constexpr float kGeluCubic = 0.044715f;
constexpr float kGeluTwiceSqrt2OverPi = 1.5957691216057308f;  // 2 * sqrt(2 / pi)
inline float gelu_tanh(float g) {
  const float t = (g * g * g * kGeluCubic + g) * -kGeluTwiceSqrt2OverPi;
  return g / (1.0f + cpu::exp_fast(t));
}
}  // namespace

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
#if EXACTLY_KERNELS_AVX2
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = cpu::exp_fast(_mm256_xor_ps(g, sign));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
#endif
  for (; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out, ThreadPool& pool) {
  pool.parallel_for(n, 1024, [&](int64_t i0, int64_t i1) { silu_mul(gate + i0, up + i0, i1 - i0, out + i0); });
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
#if EXACTLY_KERNELS_AVX2
  const __m256 one = _mm256_set1_ps(1.0f), cubic = _mm256_set1_ps(kGeluCubic);
  const __m256 scale = _mm256_set1_ps(-kGeluTwiceSqrt2OverPi);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 t = _mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(g3, cubic), g), scale);
    const __m256 e = cpu::exp_fast(t);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
#endif
  for (; i < n; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out, ThreadPool& pool) {
  pool.parallel_for(n, 1024, [&](int64_t i0, int64_t i1) { gelu_tanh_mul(gate + i0, up + i0, i1 - i0, out + i0); });
}

void clamped_swiglu_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  int64_t i = 0;
#if EXACTLY_KERNELS_AVX2
  const __m256 one = _mm256_set1_ps(1.0f), hi = _mm256_set1_ps(limit), lo = _mm256_set1_ps(-limit);
  const __m256 minus_alpha = _mm256_set1_ps(-alpha);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_min_ps(_mm256_loadu_ps(gate + i), hi);
    const __m256 u = _mm256_add_ps(_mm256_max_ps(_mm256_min_ps(_mm256_loadu_ps(up + i), hi), lo), one);
    const __m256 e = cpu::exp_fast(_mm256_mul_ps(g, minus_alpha));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u));
  }
#endif
  for (; i < n; ++i) {
    const float g = std::min(gate[i], limit), u = std::max(std::min(up[i], limit), -limit) + 1.0f;
    out[i] = g / (1.0f + cpu::exp_fast(g * -alpha)) * u;
  }
}

void clamped_swiglu_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out,
                        ThreadPool& pool) {
  pool.parallel_for(n, 1024, [&](int64_t i0, int64_t i1) {
    clamped_swiglu_mul(gate + i0, up + i0, i1 - i0, alpha, limit, out + i0);
  });
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

namespace reference {
void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * static_cast<double>(up[i]));
  }
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double two_u = 2 * k * (g + 0.044715 * g * g * g);  // 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u))
    out[i] = static_cast<float>(g / (1.0 + std::exp(-two_u)) * static_cast<double>(up[i]));
  }
}

void clamped_swiglu_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = std::min(static_cast<double>(gate[i]), static_cast<double>(limit));
    const double u = std::clamp(static_cast<double>(up[i]), -static_cast<double>(limit), static_cast<double>(limit));
    out[i] = static_cast<float>(g / (1.0 + std::exp(-static_cast<double>(alpha) * g)) * (u + 1.0));
  }
}
}  // namespace reference

}  // namespace exactly::kernels
