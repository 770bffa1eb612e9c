// Products with a handful of rows (decoding a few sequences): reading the
// weight once at the memory's speed is all that matters, so one warp streams
// one weight row with 16-byte loads that bypass L1, eight in flight per lane,
// and dots it with every input row (which stay in L1/L2). Each output is
// summed in a fixed order — lane-strided partials, then a shuffle tree — that
// does not depend on how many rows the call has.
#include <cuda_bf16.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/gemm.h"

namespace exactly::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 8;   // rows of the weight per block
// 16-byte weight loads in flight per lane (16 was slower with one row:
// docs/journal/benchmarks-record.md §6).
constexpr int kUnroll = 8;

__device__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ float dot8(uint4 a, uint4 b) {
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

template <int N>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, void* out, int64_t m, int64_t k,
                bool f32_out, bool accumulate) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  if (row >= m) return;
  const int64_t vectors = k / 8;
  const auto* wr = reinterpret_cast<const uint4*>(w + row * k);
  const auto* xv = reinterpret_cast<const uint4*>(x);
  float acc[N];
#pragma unroll
  for (int t = 0; t < N; ++t) acc[t] = 0.0f;
  // The first weights are loaded before waiting for the kernel that writes
  // x: under dependent launch that read overlaps the predecessor's tail.
  int64_t i = lane;
  uint4 wv[kUnroll];
  bool full = i + 32 * (kUnroll - 1) < vectors;
  if (full)
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = load_streaming(wr + i + 32 * u);
  release_dependents();
  wait_for_predecessor();
  while (full) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int t = 0; t < N; ++t) acc[t] += dot8(wv[u], xv[t * vectors + i + 32 * u]);
    i += 32 * kUnroll;
    full = i + 32 * (kUnroll - 1) < vectors;
    if (full)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) wv[u] = load_streaming(wr + i + 32 * u);
  }
  for (; i < vectors; i += 32) {
    const uint4 wv = load_streaming(wr + i);
#pragma unroll
    for (int t = 0; t < N; ++t) acc[t] += dot8(wv, xv[t * vectors + i]);
  }
#pragma unroll
  for (int t = 0; t < N; ++t)
    for (int offset = 16; offset > 0; offset >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], offset);
  if (lane != 0) return;
#pragma unroll
  for (int t = 0; t < N; ++t) {
    if (f32_out) {
      float* o = static_cast<float*>(out) + t * m + row;
      *o = accumulate ? *o + acc[t] : acc[t];
    } else {
      static_cast<bf16*>(out)[t * m + row] = __float2bfloat16(acc[t]);
    }
  }
}

template <int N>
void launch(const void* x, const void* w, void* out, int64_t m, int64_t k, bool f32_out, bool accumulate,
            cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((m + kWarps - 1) / kWarps);
  launch_dependent("gemv_bf16", LaunchRole::kProduct, gemv_kernel<N>, blocks, kWarps * 32, 0, stream,
                   static_cast<const bf16*>(x), static_cast<const bf16*>(w), out, m, k, f32_out, accumulate);
}

}  // namespace

bool gemv_applies(int64_t n, int64_t k, const void* x, const void* w) {
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  return n >= 1 && n <= kGemvMaxRows && k % 8 == 0 && aligned(x) && aligned(w);
}

void gemv_bf16(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, GemmOut out_type,
               bool accumulate, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(gemv_applies(n, k, x, w), "gemv: %lld rows of k=%lld (at most %d rows, k a multiple of 8)",
                       static_cast<long long>(n), static_cast<long long>(k), kGemvMaxRows);
  const bool f32 = out_type == GemmOut::f32;
  switch (n) {
    case 1: launch<1>(x, w, out, m, k, f32, accumulate, stream); break;
    case 2: launch<2>(x, w, out, m, k, f32, accumulate, stream); break;
    case 3: launch<3>(x, w, out, m, k, f32, accumulate, stream); break;
    case 4: launch<4>(x, w, out, m, k, f32, accumulate, stream); break;
    case 5: launch<5>(x, w, out, m, k, f32, accumulate, stream); break;
    case 6: launch<6>(x, w, out, m, k, f32, accumulate, stream); break;
    case 7: launch<7>(x, w, out, m, k, f32, accumulate, stream); break;
    default: launch<8>(x, w, out, m, k, f32, accumulate, stream); break;
  }
}

}  // namespace exactly::kernels::cuda
