// Few-row products in the canonical order on mma.sync m16n8k16: a warp owns
// eight weight rows (the B operand, n) and all input rows (A, m, zeros past
// the call's rows), and walks k from 0 in k16 steps, one fp32 accumulator per
// output, so each output is the same chain as in every other canonical
// kernel (gemm.h; dev/cuda/order_lab.cu checks mma.sync with either operand
// as A against it, bit for bit).
//
// It exists for products too small to feed gemm_rows' copy-engine pipeline
// (a small model's 0.5-2 MB weights at one token): its cost there is the
// launch, the descriptors and the ring's fill, not the bytes. Here each lane
// loads its fragments' 4-byte pairs directly (the four lanes of a row cover
// its 32 bytes of a step, so every sector read is used), ahead of the chain,
// and the first weights are in flight before the kernel waits for its
// predecessor (weights are never written). Gemm times it beside
// gemm_rows and cuBLASLt and keeps the fastest per shape: which one runs
// changes no bit.
#include "kernels/cuda/gemm_mma_rows.h"

#include <cuda_bf16.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/mma_primitives.cuh"

namespace exactly::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 4;  // warps per block: 32 weight rows

enum class OutKind : int { kBf16 = 0, kF32 = 1, kF32Add = 2 };

// One lane's operands for G consecutive k16 steps, loaded ahead of the chain:
// the weight pairs b0 (k 16 s + 2c) and b1 (k 16 s + 8 + 2c) of its row, and
// the input pairs a0/a2 (row g) and, with two row groups, a1/a3 (row g + 8).
// Steps past k read nothing.
template <int G>
struct Weights {
  uint32_t b[G][2];
  __device__ __forceinline__ void load(const uint32_t* row, int first, int steps) {
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int s = first + u;
      b[u][0] = s < steps ? __ldg(row + 8 * s) : 0u;
      b[u][1] = s < steps ? __ldg(row + 8 * s + 4) : 0u;
    }
  }
};

template <int G, bool kTwoRowGroups>
struct Inputs {
  uint32_t a[G][kTwoRowGroups ? 4 : 2];
  __device__ __forceinline__ void load(const uint32_t* lo, const uint32_t* hi, bool has_lo, bool has_hi, int first,
                                       int steps) {
#pragma unroll
    for (int u = 0; u < G; ++u) {
      const int s = first + u;
      a[u][0] = has_lo && s < steps ? __ldg(lo + 8 * s) : 0u;
      a[u][1] = has_lo && s < steps ? __ldg(lo + 8 * s + 4) : 0u;
      if constexpr (kTwoRowGroups) {
        a[u][2] = has_hi && s < steps ? __ldg(hi + 8 * s) : 0u;
        a[u][3] = has_hi && s < steps ? __ldg(hi + 8 * s + 4) : 0u;
      }
    }
  }
  __device__ __forceinline__ void fragment(int u, uint32_t (&f)[4]) const {
    f[0] = a[u][0], f[2] = a[u][1], f[1] = 0u, f[3] = 0u;
    if constexpr (kTwoRowGroups) f[1] = a[u][2], f[3] = a[u][3];
  }
};

// Steps come in groups of G: the weights two groups ahead of the chain (the
// first two before the kernel waits for its predecessor), the inputs one
// group ahead, so that neither load's latency sits on the chain.
template <int G, bool kTwoRowGroups>
__global__ void __launch_bounds__(kWarps * 32)
    gemm_mma_rows_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w, void* out, int m, int n_out, int k,
                         int out_kind) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int row0 = (blockIdx.x * kWarps + threadIdx.x / 32) * 8;  // the warp's first weight row
  const int steps = k / 16;
  const bool active = row0 < n_out;  // a warp past the weight's end only releases dependents
  // Rows past n_out (in the last warp) re-read row n_out - 1; their outputs are dropped.
  const int w_row = min(row0 + g, n_out - 1);
  const auto* w_pairs = reinterpret_cast<const uint32_t*>(w + int64_t{w_row} * k) + c;
  Weights<G> w_next, w_after;
  if (active) w_next.load(w_pairs, 0, steps), w_after.load(w_pairs, G, steps);
  release_dependents();
  wait_for_predecessor();  // x is the previous kernel's output
  if (!active) return;
  const bool has_lo = g < m, has_hi = kTwoRowGroups && g + 8 < m;
  const auto* x_lo = reinterpret_cast<const uint32_t*>(x + int64_t{has_lo ? g : 0} * k) + c;
  const auto* x_hi = reinterpret_cast<const uint32_t*>(x + int64_t{has_hi ? g + 8 : 0} * k) + c;
  Inputs<G, kTwoRowGroups> x_next;
  x_next.load(x_lo, x_hi, has_lo, has_hi, 0, steps);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int first = 0; first < steps; first += G) {
    const Weights<G> w_cur = w_next;
    const Inputs<G, kTwoRowGroups> x_cur = x_next;
    w_next = w_after;
    if (first + 2 * G < steps) w_after.load(w_pairs, first + 2 * G, steps);
    if (first + G < steps) x_next.load(x_lo, x_hi, has_lo, has_hi, first + G, steps);
#pragma unroll
    for (int u = 0; u < G; ++u) {
      if (first + u >= steps) continue;
      uint32_t a[4];
      x_cur.fragment(u, a);
      Elem<bf16>::mma(acc, a, w_cur.b[u][0], w_cur.b[u][1]);
    }
  }
  // acc[0..1]: input row g, weight rows row0 + 2c, + 1; acc[2..3]: input row g + 8.
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int token = g + (e >= 2 ? 8 : 0), row = row0 + 2 * c + (e & 1);
    if (token >= m || row >= n_out) continue;
    const int64_t at = int64_t{token} * n_out + row;
    if (out_kind == static_cast<int>(OutKind::kBf16)) {
      static_cast<bf16*>(out)[at] = __float2bfloat16_rn(acc[e]);
    } else {
      float* o = static_cast<float*>(out) + at;
      *o = out_kind == static_cast<int>(OutKind::kF32Add) ? __fadd_rn(*o, acc[e]) : acc[e];
    }
  }
}

}  // namespace

bool gemm_mma_rows_applies(int64_t m, int64_t n_out, int64_t k, const void* x, const void* w) {
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 3u) == 0; };
  return m >= 1 && m <= kGemmMmaRowsMax && n_out >= 1 && n_out < (int64_t{1} << 30) && k >= 16 && k % 16 == 0 &&
         k < (int64_t{1} << 30) && aligned(x) && aligned(w);
}

void gemm_mma_rows_bf16(const void* x, const void* w, void* out, int64_t m, int64_t n_out, int64_t k,
                        GemmOut out_type, bool accumulate, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(gemm_mma_rows_applies(m, n_out, k, x, w),
                       "gemm_mma_rows: %lld rows of a %lld x %lld weight (at most %d rows, k a multiple of 16)",
                       static_cast<long long>(m), static_cast<long long>(n_out), static_cast<long long>(k),
                       kGemmMmaRowsMax);
  EXACTLY_CUDA_REQUIRE(!accumulate || out_type == GemmOut::f32, "gemm_mma_rows: accumulating needs an fp32 output");
  const OutKind kind = out_type == GemmOut::bf16 ? OutKind::kBf16 : accumulate ? OutKind::kF32Add : OutKind::kF32;
  const int64_t warps = (n_out + 7) / 8;
  const dim3 grid(static_cast<unsigned>((warps + kWarps - 1) / kWarps));
  const auto* xb = static_cast<const bf16*>(x);
  const auto* wb = static_cast<const bf16*>(w);
  // Groups of 16 steps with one input row group, of 8 with two (the registers allow no more).
  const auto kernel = m > 8 ? gemm_mma_rows_kernel<8, true> : gemm_mma_rows_kernel<16, false>;
  launch_dependent("gemm_mma_rows", LaunchRole::kProduct, kernel, grid, dim3(kWarps * 32), 0, stream, xb, wb, out,
                   static_cast<int>(m), static_cast<int>(n_out), static_cast<int>(k), static_cast<int>(kind));
}

}  // namespace exactly::kernels::cuda
