// Matmul for one to a few tokens (decode, short speculative verifies): the
// weights are streamed once per group of up to kFusedTokens tokens, each 32-element group
// decoded in registers and multiplied straight into the accumulators. The
// work is bounded by the decode instructions and memory bandwidth, not FMAs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/reduction_order.h"
#include "kernels/cpu/weight_decode.h"

#if EXACTLY_KERNELS_AVX2
namespace exactly::kernels::cpu {

// How far ahead of the decoder to prefetch weights. With only the hardware
// prefetcher the stream from DRAM ran at ~4 GB/s on one core (latency-bound
// between bursts of decode work); prefetching 1-2 KiB ahead doubled decode
// speed (bench/README.md).
constexpr int kPrefetchBytes = 2048;

// NR rows x NT tokens. Accumulators follow reduction_order.h exactly.
template <class D, int NR, int NT>
__attribute__((always_inline)) inline void fused_block(const uint8_t* w,  // [NR, row_bytes] first row of the block
                                                       int64_t row_bytes, int64_t cols,
                                                       const float* x,  // [NT, cols]
                                                       float* y,        // [NT, y_stride] at the block's first row
                                                       int64_t y_stride) {
  __m256 acc[NT][NR];
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  const int64_t groups = cols / kGroup;
  for (int64_t g = 0; g < groups; ++g) {
    for (int r = 0; r < NR; ++r) {
      const uint8_t* group = w + r * row_bytes + g * D::kGroupBytes;
      _mm_prefetch(reinterpret_cast<const char*>(group) + kPrefetchBytes, _MM_HINT_T0);
      __m256 wv[4];
      D::decode(group, wv);
      for (int t = 0; t < NT; ++t) {
        const float* xg = x + t * cols + g * kGroup;
        for (int j = 0; j < 4; ++j) acc[t][r] = _mm256_fmadd_ps(wv[j], _mm256_loadu_ps(xg + 8 * j), acc[t][r]);
      }
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * y_stride + r] = fold_lanes(acc[t][r]);
}

// Tokens multiplied per decode of the weights: NT accumulators plus the four
// decoded vectors must fit the 16 ymm registers (at 10, one constant is
// reloaded per group; a verify of up to 9 drafts is one pass).
constexpr int kFusedTokens = 10;

// Rows [r0, r1) of NT tokens, kRows at a time, then one by one.
template <class D, int NT, int kRows>
__attribute__((always_inline)) inline void fused_row_blocks(const uint8_t* w, int64_t row_bytes, int64_t cols,
                                                            const float* x, float* y, int64_t y_stride, int64_t r0,
                                                            int64_t r1) {
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows)
    fused_block<D, kRows, NT>(w + r * row_bytes, row_bytes, cols, x, y + r, y_stride);
  for (; r < r1; ++r) fused_block<D, 1, NT>(w + r * row_bytes, row_bytes, cols, x, y + r, y_stride);
}

// On CPUs with AVX-512 (chosen at run time; the build stays x86-64-v3) the
// same 8-lane instructions, so every lane computes what it computes with 16
// registers: the VL extension's 32 vector registers hold two rows of up to
// 10 tokens, which doubles the independent FMA chains and lets each
// activation load feed two rows. With 16 registers one row at 5-10 tokens
// ran at 40-67% of the FMA peak, the FFN's down projection (9 tokens'
// activations overflow the L1 cache) lowest (`bench_kernels --verify`,
// docs/journal/benchmarks-record.md §4).
bool cpu_runs_avx512();

template <class D, int NT>
__attribute__((target("avx512f,avx512vl"))) void fused_rows_wide(const uint8_t* w, int64_t row_bytes, int64_t cols,
                                                                 const float* x, float* y, int64_t y_stride,
                                                                 int64_t r0, int64_t r1) {
  fused_row_blocks<D, NT, NT <= 2 ? 4 : 2>(w, row_bytes, cols, x, y, y_stride, r0, r1);
}

// Rows [r0, r1) of NT tokens. Four rows at a time give the FMA chains enough
// independent work; fewer when many tokens would run out of registers.
template <class D, int NT>
void fused_rows(const uint8_t* w, int64_t row_bytes, int64_t cols, const float* x, float* y, int64_t y_stride,
                int64_t r0, int64_t r1) {
  if constexpr (NT > 1) {  // one token streams the weights from memory either way: measured no faster
    if (cpu_runs_avx512()) return fused_rows_wide<D, NT>(w, row_bytes, cols, x, y, y_stride, r0, r1);
  }
  fused_row_blocks<D, NT, NT <= 2 ? 4 : NT <= 4 ? 2 : 1>(w, row_bytes, cols, x, y, y_stride, r0, r1);
}

// All tokens of x: [n_tokens, cols] -> y: [n_tokens, rows], rows [r0, r1).
template <class D>
void fused_matmul_rows(const uint8_t* w,  // [rows, row_bytes]
                       int64_t rows, int64_t cols, const float* x, int64_t n_tokens, float* y, int64_t r0,
                       int64_t r1) {
  const int64_t row_bytes = cols / kGroup * D::kGroupBytes;
  for (int64_t t = 0; t < n_tokens; t += kFusedTokens) {
    const float* xt = x + t * cols;
    float* yt = y + t * rows;
    switch (std::min<int64_t>(kFusedTokens, n_tokens - t)) {
      case 1: fused_rows<D, 1>(w, row_bytes, cols, xt, yt, rows, r0, r1); break;
      case 2: fused_rows<D, 2>(w, row_bytes, cols, xt, yt, rows, r0, r1); break;
      case 3: fused_rows<D, 3>(w, row_bytes, cols, xt, yt, rows, r0, r1); break;
      case 4: fused_rows<D, 4>(w, row_bytes, cols, xt, yt, rows, r0, r1); break;
      case 5: fused_rows<D, 5>(w, row_bytes, cols, xt, yt, rows, r0, r1); break;
      case 6: fused_rows<D, 6>(w, row_bytes, cols, xt, yt, rows, r0, r1); break;
      case 7: fused_rows<D, 7>(w, row_bytes, cols, xt, yt, rows, r0, r1); break;
      case 8: fused_rows<D, 8>(w, row_bytes, cols, xt, yt, rows, r0, r1); break;
      case 9: fused_rows<D, 9>(w, row_bytes, cols, xt, yt, rows, r0, r1); break;
      default: fused_rows<D, 10>(w, row_bytes, cols, xt, yt, rows, r0, r1); break;
    }
  }
}

}  // namespace exactly::kernels::cpu
#endif
