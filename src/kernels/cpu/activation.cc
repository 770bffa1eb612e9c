// SwiGLU gate (silu(gate) * up) and the residual add.
#include <cmath>

#include "kernels/cpu/exp_fast.h"
#include "kernels/ops.h"

namespace exactly::kernels {

namespace {
// The 8-lane loop and the scalar tail compute the same bits (exp_fast.h), so
// an element's value never depends on where a chunk of the pool starts.
inline float silu(float g) { return g / (1.0f + cpu::exp_fast(-g)); }
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
}  // namespace reference

}  // namespace exactly::kernels
