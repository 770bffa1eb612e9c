// Matmul for many tokens (prefill): a GEMM whose weights are dequantised once
// per tile into an L1-resident fp32 scratch and reused by every token of a
// token block through a register-blocked micro-kernel (4 rows x 3 tokens =
// 12 accumulators). The work is bounded by FMA throughput.
//
// Each output keeps its own 8-lane accumulator; between K chunks it is parked
// in memory and reloaded, which does not round, so the result follows
// reduction_order.h bit for bit whatever the tiling.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/reduction_order.h"

#if EXACTLY_KERNELS_AVX2
namespace exactly::kernels::cpu {

constexpr int kTileRows = 16;    // weight rows dequantised together
constexpr int kChunkK = 256;     // K elements per dequantised chunk (one K-quant super-block)
constexpr int kTokenBlock = 48;  // tokens sharing one dequantisation of a tile (96 halved ffn_down: x left L2)
constexpr int kMicroRows = 4;
constexpr int kMicroTokens = 3;

// Per-thread scratch, reused across calls.
struct TiledScratch {
  alignas(64) float w_tile[kTileRows * kChunkK];            // [kTileRows, kChunkK]
  alignas(64) float acc[kTokenBlock * kTileRows * kLanes];  // [kTokenBlock, kTileRows, 8]
};
TiledScratch& tiled_scratch();

template <int NR, int NT>
inline void micro_kernel(const float* w,  // [NR, kChunkK] rows of the tile
                         const float* x,  // [NT, x_stride] at the chunk's first column
                         int64_t x_stride,
                         float* acc,      // [NT, kTileRows, 8] at the first row
                         int64_t steps, bool first_chunk) {
  __m256 a[NT][NR];
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r)
      a[t][r] = first_chunk ? _mm256_setzero_ps() : _mm256_load_ps(acc + (t * kTileRows + r) * kLanes);
  for (int64_t s = 0; s < steps; ++s) {
    __m256 xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = _mm256_loadu_ps(x + t * x_stride + s * kLanes);
    for (int r = 0; r < NR; ++r) {
      const __m256 wv = _mm256_load_ps(w + r * kChunkK + s * kLanes);
      for (int t = 0; t < NT; ++t) a[t][r] = _mm256_fmadd_ps(wv, xv[t], a[t][r]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) _mm256_store_ps(acc + (t * kTileRows + r) * kLanes, a[t][r]);
}

template <int NR>
inline void micro_kernel_tokens(int nt, const float* w, const float* x, int64_t x_stride, float* acc,
                                int64_t steps, bool first_chunk) {
  switch (nt) {
    case 1: micro_kernel<NR, 1>(w, x, x_stride, acc, steps, first_chunk); break;
    case 2: micro_kernel<NR, 2>(w, x, x_stride, acc, steps, first_chunk); break;
    default: micro_kernel<NR, 3>(w, x, x_stride, acc, steps, first_chunk); break;
  }
}

inline void micro_kernel_any(int nr, int nt, const float* w, const float* x, int64_t x_stride, float* acc,
                             int64_t steps, bool first_chunk) {
  switch (nr) {
    case 1: micro_kernel_tokens<1>(nt, w, x, x_stride, acc, steps, first_chunk); break;
    case 2: micro_kernel_tokens<2>(nt, w, x, x_stride, acc, steps, first_chunk); break;
    case 3: micro_kernel_tokens<3>(nt, w, x, x_stride, acc, steps, first_chunk); break;
    default: micro_kernel_tokens<4>(nt, w, x, x_stride, acc, steps, first_chunk); break;
  }
}

// Rows [r0, r1) for all tokens. fill(row, k0, kc, dst) writes the dequantised
// weights w[row, k0 : k0 + kc] to dst (kc is a multiple of 32, <= kChunkK).
template <class Fill>
void tiled_matmul_rows(const Fill& fill, int64_t rows, int64_t cols,
                       const float* x,  // [n_tokens, cols]
                       int64_t n_tokens,
                       float* y,  // [n_tokens, rows]
                       int64_t r0, int64_t r1) {
  TiledScratch& s = tiled_scratch();
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock) {
    const int nt = static_cast<int>(std::min<int64_t>(kTokenBlock, n_tokens - t0));
    for (int64_t rt = r0; rt < r1; rt += kTileRows) {
      const int nr = static_cast<int>(std::min<int64_t>(kTileRows, r1 - rt));
      for (int64_t k0 = 0; k0 < cols; k0 += kChunkK) {
        const int64_t kc = std::min<int64_t>(kChunkK, cols - k0);
        for (int r = 0; r < nr; ++r) fill(rt + r, k0, kc, s.w_tile + r * kChunkK);
        for (int t = 0; t < nt; t += kMicroTokens) {
          const int ntt = std::min(kMicroTokens, nt - t);
          const float* xt = x + (t0 + t) * cols + k0;
          for (int r = 0; r < nr; r += kMicroRows)
            micro_kernel_any(std::min(kMicroRows, nr - r), ntt, s.w_tile + r * kChunkK, xt, cols,
                             s.acc + (t * kTileRows + r) * kLanes, kc / kLanes, k0 == 0);
        }
      }
      for (int t = 0; t < nt; ++t)
        for (int r = 0; r < nr; ++r) y[(t0 + t) * rows + rt + r] = fold_lanes(s.acc + (t * kTileRows + r) * kLanes);
    }
  }
}

}  // namespace exactly::kernels::cpu
#endif
