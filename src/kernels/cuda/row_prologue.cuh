// The row computations that both a layer operation and a product's prologue
// perform — RMSNorm of an fp32 row into bf16, SwiGLU of a gate|up row — as
// one device function each, so the fused single-row product (gemv.cu) and
// the separate kernels (layer_ops.cu) give the same bits: same strided
// partial sums, same reduction tree, same expressions.
#pragma once

#include <cuda_bf16.h>

namespace exactly::kernels::cuda {

inline constexpr int kRowThreads = 256;

// Sum over a block of kRowThreads threads in a fixed order: each thread's
// strided partial, then a shuffle tree within each warp, then warp 0 over the
// warps' sums.
__device__ inline float block_sum(float v) {
  __shared__ float warp_sums[kRowThreads / 32];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kRowThreads / 32 ? warp_sums[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_sums[0] = v;
  }
  __syncthreads();
  const float total = warp_sums[0];
  __syncthreads();  // warp_sums may be reused by the caller's next reduction
  return total;
}

// out[j] = bf16(x[j] / sqrt(mean(x^2) + eps) * weight[j]) for one row, by a
// block of kRowThreads threads.
__device__ inline void rmsnorm_row(const float* x, const float* weight, int dim, float eps, __nv_bfloat16* out) {
  float ss = 0.0f;
  for (int j = threadIdx.x; j < dim; j += kRowThreads) ss += x[j] * x[j];
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(dim) + eps);
  for (int j = threadIdx.x; j < dim; j += kRowThreads) out[j] = __float2bfloat16(x[j] * inv * weight[j]);
}

// silu(g) * u, rounded to bf16.
__device__ inline __nv_bfloat16 swiglu_value(__nv_bfloat16 gate, __nv_bfloat16 up) {
  const float g = __bfloat162float(gate), u = __bfloat162float(up);
  return __float2bfloat16(g / (1.0f + __expf(-g)) * u);
}

}  // namespace exactly::kernels::cuda
