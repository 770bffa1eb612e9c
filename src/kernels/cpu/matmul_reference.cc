// Scalar reference matmul. It follows reduction_order.h literally, so the
// SIMD paths must match it bit for bit (and without AVX2 it is the kernel).
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/reduction_order.h"
#include "kernels/ops.h"

namespace exactly::kernels::reference {

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  EXACTLY_CHECK(w.cols % cpu::kLanes == 0, "matmul: %lld columns is not a multiple of 8",
                static_cast<long long>(w.cols));
  const int64_t row_bytes = ggml_row_bytes(w.type, w.cols);
  std::vector<float> row(static_cast<size_t>(w.cols));  // [cols] dequantised weights
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + r * row_bytes, row.data(), w.cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * w.cols;
      float lanes[cpu::kLanes] = {};
      for (int64_t k = 0; k < w.cols; ++k)
        lanes[k % cpu::kLanes] = std::fma(row[static_cast<size_t>(k)], xt[k], lanes[k % cpu::kLanes]);
      y[t * w.rows + r] = cpu::fold_lanes(lanes);
    }
  }
}

}  // namespace exactly::kernels::reference
