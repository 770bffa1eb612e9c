// Matmul on the K-quants (and any type dequantize_row knows): each 256-element
// chunk of a row is dequantised with the scalar reference into scratch, then
// multiplied with the same fp32 accumulation as every other path. Slower than
// the fused types but exact and batch-invariant in the same way.
#include <algorithm>

#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/matmul_tiled.h"

namespace exactly::kernels::cpu {

#if EXACTLY_KERNELS_AVX2
namespace {

constexpr int kMaxFusedTokens = 4;

// Rows [r0, r1) for up to kMaxFusedTokens tokens, one row at a time.
void generic_fused_rows(const WeightMatrix& w, int64_t row_bytes, const float* x, int nt, float* y, int64_t r0,
                        int64_t r1) {
  alignas(32) float chunk[kChunkK];  // [kChunkK] dequantised weights
  const auto* base = static_cast<const uint8_t*>(w.data);
  for (int64_t r = r0; r < r1; ++r) {
    __m256 acc[kMaxFusedTokens];
    for (int t = 0; t < nt; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t k0 = 0; k0 < w.cols; k0 += kChunkK) {
      const int64_t kc = std::min<int64_t>(kChunkK, w.cols - k0);
      dequantize_row(w.type, base + r * row_bytes + ggml_row_bytes(w.type, k0), chunk, kc);
      for (int t = 0; t < nt; ++t) {
        const float* xt = x + t * w.cols + k0;
        for (int64_t k = 0; k < kc; k += kLanes)
          acc[t] = _mm256_fmadd_ps(_mm256_load_ps(chunk + k), _mm256_loadu_ps(xt + k), acc[t]);
      }
    }
    for (int t = 0; t < nt; ++t) y[t * w.rows + r] = fold_lanes(acc[t]);
  }
}

}  // namespace

void matmul_generic(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const int64_t row_bytes = ggml_row_bytes(w.type, w.cols);
  if (n_tokens < kMaxFusedTokens) {
    pool.parallel_for(w.rows, kTileRows, [&](int64_t r0, int64_t r1) {
      generic_fused_rows(w, row_bytes, x, static_cast<int>(n_tokens), y, r0, r1);
    });
    return;
  }
  const auto* base = static_cast<const uint8_t*>(w.data);
  auto fill = [&](int64_t row, int64_t k0, int64_t kc, float* dst) {
    dequantize_row(w.type, base + row * row_bytes + ggml_row_bytes(w.type, k0), dst, kc);
  };
  pool.parallel_for(w.rows, kTileRows, [&](int64_t r0, int64_t r1) {
    tiled_matmul_rows(fill, w.rows, w.cols, x, n_tokens, y, r0, r1);
  });
}
#endif

}  // namespace exactly::kernels::cpu
