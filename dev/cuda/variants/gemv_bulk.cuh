// Single-row products fed by the copy engine: one persistent block per SM
// (or two) takes a contiguous range of the weight's rows, so every SM reads
// the same number of bytes (31 or 32 rows of Llama-3-8B's o projection
// instead of 3 or 4 blocks of 8 rows), and one producer thread streams that
// range into a ring of shared-memory stages with 1-D bulk copies; the eight
// consumer warps each take one row of a stage. A lane sums the same vectors
// in the same order as the register-streaming kernel in gemv.cu (lane-strided
// partials, then a shuffle tree), so the two agree bit for bit.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/tma_primitives.cuh"

namespace exactly::kernels::cuda::lab {

using bf16 = __nv_bfloat16;
constexpr int kBulkRows = 8;  // consumer warps, one weight row each per stage

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

template <bool kEvictFirst>
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar,
                                          uint64_t policy) {
  if constexpr (kEvictFirst)
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
            dst),
        "l"(src), "r"(bytes), "r"(bar), "l"(policy)
        : "memory");
  else
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

__device__ __forceinline__ float bulk_dot8(uint4 a, uint4 b) {
  const auto* pa = reinterpret_cast<const __nv_bfloat162*>(&a);
  const auto* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = __bfloat1622float2(pa[i]), fb = __bfloat1622float2(pb[i]);
    s = fmaf(fa.x, fb.x, s);
    s = fmaf(fa.y, fb.y, s);
  }
  return s;
}

template <int kChunk, int kStages>
constexpr size_t bulk_shared_bytes() {
  return size_t{kStages} * kBulkRows * kChunk * 2 + 2 * kStages * sizeof(uint64_t);
}

// kChunk columns of each of the stage's rows per stage (a multiple of 256, so
// a lane's vectors continue across stages in the same stride).
template <int N, int kChunk, int kStages, bool kEvictFirst>
__global__ void __launch_bounds__((kBulkRows + 1) * 32)
    gemv_bulk_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, void* out, int64_t m, int64_t k,
                     bool f32_out, bool accumulate) {
  static_assert(kChunk % 256 == 0, "a stage must hold whole 32-lane strides of 16-byte vectors");
  extern __shared__ __align__(128) unsigned char shared[];
  const bf16* tiles = reinterpret_cast<const bf16*>(shared);
  const uint32_t full0 = shared_address(shared + size_t{kStages} * kBulkRows * kChunk * 2);
  const uint32_t empty0 = full0 + 8 * kStages;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  const int64_t per_block = m / gridDim.x, extra = m % gridDim.x, b = blockIdx.x;
  const int64_t row0 = b * per_block + (b < extra ? b : extra);
  const int64_t rows = per_block + (b < extra ? 1 : 0);
  const int64_t chunks = (k + kChunk - 1) / kChunk;
  const int64_t items = (rows + kBulkRows - 1) / kBulkRows * chunks;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full0 + 8 * s, 1);
      mbarrier_init(empty0 + 8 * s, kBulkRows);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  release_dependents();

  if (warp == kBulkRows) {
    // The producer reads only the weights, which no kernel writes: it need
    // not wait for the predecessor, so the first stages land during its tail.
    if (lane == 0) {
      uint64_t policy = 0;
      if constexpr (kEvictFirst) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
      for (int64_t t = 0; t < items; ++t) {
        const int s = static_cast<int>(t % kStages);
        mbarrier_wait(empty0 + 8 * s, static_cast<uint32_t>(((t / kStages) & 1) ^ 1));
        const int64_t g = t / chunks, col0 = t % chunks * kChunk;
        const int64_t cols = k - col0 < kChunk ? k - col0 : kChunk;
        const int64_t stage_rows = rows - g * kBulkRows < kBulkRows ? rows - g * kBulkRows : kBulkRows;
        const auto bytes = static_cast<uint32_t>(cols * 2);
        mbarrier_arrive_expect_tx(full0 + 8 * s, bytes * static_cast<uint32_t>(stage_rows));
        for (int r = 0; r < stage_rows; ++r)
          bulk_load<kEvictFirst>(shared_address(tiles + (static_cast<size_t>(s) * kBulkRows + r) * kChunk),
                                 w + (row0 + g * kBulkRows + r) * k + col0, bytes, full0 + 8 * s, policy);
      }
    }
    return;
  }

  wait_for_predecessor();
  const int64_t vectors = k / 8;
  const auto* xv = reinterpret_cast<const uint4*>(x);
  float acc[N];
#pragma unroll
  for (int t = 0; t < N; ++t) acc[t] = 0.0f;
  for (int64_t item = 0; item < items; ++item) {
    const int s = static_cast<int>(item % kStages);
    const int64_t g = item / chunks, c = item % chunks;
    const int64_t row = g * kBulkRows + warp;  // within the block's range
    mbarrier_wait(full0 + 8 * s, static_cast<uint32_t>((item / kStages) & 1));
    if (row < rows) {
      const auto* tile = reinterpret_cast<const uint4*>(tiles + (static_cast<size_t>(s) * kBulkRows + warp) * kChunk);
      const int64_t v0 = c * (kChunk / 8);
      const int cols = static_cast<int>(k - c * kChunk < kChunk ? k - c * kChunk : kChunk);
      if (cols == kChunk) {
#pragma unroll
        for (int v = lane; v < kChunk / 8; v += 32) {
          const uint4 wv = tile[v];
#pragma unroll
          for (int t = 0; t < N; ++t) acc[t] += bulk_dot8(wv, xv[t * vectors + v0 + v]);
        }
      } else {
        for (int v = lane; v < cols / 8; v += 32) {
          const uint4 wv = tile[v];
#pragma unroll
          for (int t = 0; t < N; ++t) acc[t] += bulk_dot8(wv, xv[t * vectors + v0 + v]);
        }
      }
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(empty0 + 8 * s);
    if (c == chunks - 1) {
      if (row < rows) {
#pragma unroll
        for (int t = 0; t < N; ++t)
          for (int offset = 16; offset > 0; offset >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], offset);
        if (lane == 0) {
          const int64_t out_row = row0 + row;
#pragma unroll
          for (int t = 0; t < N; ++t) {
            if (f32_out) {
              float* o = static_cast<float*>(out) + t * m + out_row;
              *o = accumulate ? *o + acc[t] : acc[t];
            } else {
              static_cast<bf16*>(out)[t * m + out_row] = __float2bfloat16(acc[t]);
            }
          }
        }
      }
#pragma unroll
      for (int t = 0; t < N; ++t) acc[t] = 0.0f;
    }
  }
}

}  // namespace exactly::kernels::cuda::lab
