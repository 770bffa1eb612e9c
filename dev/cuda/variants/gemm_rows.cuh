// Lab variant (dev/cuda/gemv_lab.cu --rows; not in production): products
// with a few rows (decoding 2 to 64 sequences) on the tensor cores, streaming
// each weight once. Measured slower than cuBLASLt chained in a graph at every
// row count (dev/cuda/NOTES.md, "Few-row products").
//
// out[t, r] = sum_j x[t, j] w[r, j] for tokens t < n and weight rows r. A
// block owns 16 x MT weight rows and its WARPS warps take turns over their
// 32-column chunks; each lane loads 16 bytes of a weight row straight from
// global memory into registers, U chunks in flight, and the first chunks are
// requested before the kernel waits for its predecessor (dependent launch).
//
// No shared memory on the way in: a lane's 16 bytes are 8 consecutive columns
// of one row, and the mma.m16n8k16 fragments want columns 2c..2c+1 and
// 8+2c..8+2c+1 (c = lane % 4). The product does not care which physical column
// sits at which logical k as long as both operands agree, so a 32-column chunk
// is read as two k16 steps with logical k {2c, 2c+1, 8+2c, 9+2c} of step s
// at physical columns 8c + 4s + {0, 1, 2, 3}, the same for the input rows,
// which each lane loads the same way (through L1: every warp of the block
// reads them).
//
// Each output is the sum of its warps' partials in warp order, over a fixed
// assignment of chunks to warps, and a token's column of the mma never sees
// another token's: its bits do not depend on how many rows the call has.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/mma_primitives.cuh"

namespace exactly::kernels::cuda::lab {

// MT: 16-row tiles of the weight per block; NT: 8-token tiles (the call's
// rows, padded with zeros); WARPS: warps splitting the columns; U: chunks of
// 32 columns in flight per warp.
template <int MT, int NT, int WARPS, int U>
struct GemmRowsShape {
  static constexpr int kRows = 16 * MT;  // weight rows per block
  static constexpr int kThreads = 32 * WARPS;
  static constexpr int kPartialFloats = MT * NT * 32 * 4;  // one warp's accumulators
  static constexpr int kSharedBytes = WARPS * kPartialFloats * 4;
};

__device__ __forceinline__ uint4 gemm_rows_stream(const __nv_bfloat16* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// m rows of w ([m, k] row-major), n <= 8 * NT rows of x ([n, k]); k a
// multiple of 32; x and w 16-byte aligned. out is [n, m]: fp32 (optionally
// added to what is there) or bf16.
template <int MT, int NT, int WARPS, int U>
__global__ void __launch_bounds__(32 * WARPS)
    gemm_rows_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w, void* out, int n,
                     int64_t m, int64_t k, bool f32_out, bool accumulate) {
  using S = GemmRowsShape<MT, NT, WARPS, U>;
  extern __shared__ float partials[];  // [WARPS][MT][NT][32 lanes][4]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, c = lane % 4;
  const int64_t row0 = int64_t{blockIdx.x} * S::kRows;
  const int chunks = static_cast<int>(k / 32);

  // This lane's weight rows (g and g + 8 of each tile; rows past m read row
  // m - 1 and are never stored) and input rows (g of each token tile).
  const __nv_bfloat16* wrow[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = row0 + mt * 16 + h * 8 + g;
      wrow[mt][h] = w + (r < m ? r : m - 1) * k + 8 * c;
    }

  uint4 wv[U][MT][2];
  auto load_w = [&](int slot, int chunk) {
    if (chunk >= chunks) return;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) wv[slot][mt][h] = gemm_rows_stream(wrow[mt][h] + int64_t{chunk} * 32);
  };
  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;

  // The weights do not depend on the kernel ahead: the first U chunks are
  // asked for before waiting for it.
#pragma unroll
  for (int u = 0; u < U; ++u) load_w(u, warp + u * WARPS);
  release_dependents();
  wait_for_predecessor();

  for (int base = warp; base < chunks; base += U * WARPS) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int chunk = base + u * WARPS;
      if (chunk >= chunks) break;
      uint4 xv[NT];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int t = nt * 8 + g;
        xv[nt] = t < n ? *reinterpret_cast<const uint4*>(x + int64_t{t} * k + int64_t{chunk} * 32 + 8 * c)
                       : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int s = 0; s < 2; ++s)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const uint32_t* lo = reinterpret_cast<const uint32_t*>(&wv[u][mt][0]);
          const uint32_t* hi = reinterpret_cast<const uint32_t*>(&wv[u][mt][1]);
          const uint32_t a[4] = {lo[2 * s], hi[2 * s], lo[2 * s + 1], hi[2 * s + 1]};
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint32_t* b = reinterpret_cast<const uint32_t*>(&xv[nt]);
            Elem<__nv_bfloat16>::mma(acc[mt][nt], a, b[2 * s], b[2 * s + 1]);
          }
        }
      load_w(u, chunk + U * WARPS);
    }
  }

  // The warps' partials through shared memory, summed in warp order.
  float* mine = partials + warp * S::kPartialFloats;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      *reinterpret_cast<float4*>(mine + ((mt * NT + nt) * 32 + lane) * 4) =
          make_float4(acc[mt][nt][0], acc[mt][nt][1], acc[mt][nt][2], acc[mt][nt][3]);
  __syncthreads();
  // One output per thread and pass, the weight row fastest (coalesced stores).
  for (int e = threadIdx.x; e < S::kRows * NT * 8; e += S::kThreads) {
    const int t = e / S::kRows, r = e % S::kRows;
    const int64_t row = row0 + r;
    if (t >= n || row >= m) continue;
    const int mt = r / 16, rg = r % 8, rh = (r % 16) / 8;
    const int nt = t / 8, tc = (t % 8) / 2, tl = t % 2;
    const int at = ((mt * NT + nt) * 32 + rg * 4 + tc) * 4 + rh * 2 + tl;
    float sum = partials[at];
#pragma unroll
    for (int v = 1; v < WARPS; ++v) sum += partials[v * S::kPartialFloats + at];
    if (f32_out) {
      float* o = static_cast<float*>(out) + int64_t{t} * m + row;
      *o = accumulate ? *o + sum : sum;
    } else {
      static_cast<__nv_bfloat16*>(out)[int64_t{t} * m + row] = __float2bfloat16(sum);
    }
  }
}

}  // namespace exactly::kernels::cuda::lab
