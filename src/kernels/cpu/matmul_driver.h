// Runs a matmul on one of the fast weight types: picks the fused path for a
// few tokens and the tiled GEMM for many, and splits the output rows over the
// thread pool in whole tiles (each output is computed by exactly one thread).
#pragma once

#include "core/thread_pool.h"
#include "kernels/cpu/matmul_fused.h"
#include "kernels/cpu/matmul_tiled.h"
#include "kernels/ops.h"

#if EXACTLY_KERNELS_AVX2
namespace exactly::kernels::cpu {

// Up to one fused pass of tokens, decoding in registers beats writing and
// re-reading a dequantised tile: the tiled path's fill and its one- and
// two-token micro-kernels cost 14.5 ms for a 4-token verify's matmuls where
// the fused pass takes 9.0 (`bench_kernels --verify`,
// docs/journal/benchmarks-record.md §4); 9 and 10 tokens in one pass take
// 18-20 ms against 21-22 tiled; past one pass the GEMM wins as tokens grow.
constexpr int64_t kMinTiledTokens = kFusedTokens + 1;

template <class D>
void run_matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = w.cols / kGroup * D::kGroupBytes;
  if (n_tokens < kMinTiledTokens) {
    pool.parallel_for(w.rows, kTileRows, [&](int64_t r0, int64_t r1) {
      fused_matmul_rows<D>(base, w.rows, w.cols, x, n_tokens, y, r0, r1);
    });
    return;
  }
  auto fill = [&](int64_t row, int64_t k0, int64_t kc, float* dst) {
    const uint8_t* p = base + row * row_bytes + k0 / kGroup * D::kGroupBytes;
    for (int64_t g = 0; g < kc / kGroup; ++g) {
      __m256 wv[4];
      D::decode(p + g * D::kGroupBytes, wv);
      for (int j = 0; j < 4; ++j) _mm256_store_ps(dst + g * kGroup + 8 * j, wv[j]);
    }
  };
  pool.parallel_for(w.rows, kTileRows, [&](int64_t r0, int64_t r1) {
    tiled_matmul_rows(fill, w.rows, w.cols, x, n_tokens, y, r0, r1);
  });
}

}  // namespace exactly::kernels::cpu
#endif
