// SwiGLU gate (silu(gate) * up) and the residual add.
#include <cmath>

#include "kernels/ops.h"

namespace exactly::kernels {

namespace {
inline float silu(float g) { return g / (1.0f + std::exp(-g)); }
}  // namespace

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
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
