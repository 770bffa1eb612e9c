// The launcher of the few-row tensor-core products (gemm_rows_kernel.cuh):
// the call's rows padded to 8, 16, 32 or 64, one block per 32 weight rows.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_rows_kernel.cuh"
#include "kernels/cuda/launch_common.h"

namespace exactly::kernels::cuda {
namespace {

// 32 weight rows per block, eight warps over the columns, four chunks of 32
// columns in flight per warp (dev/cuda/gemv_lab.cu --rows compares others).
constexpr int kTiles = 2, kWarps = 8, kInFlight = 4;

template <int NT>
void launch(const void* x, const void* w, void* out, int n, int64_t m, int64_t k, bool f32_out, bool accumulate,
            cudaStream_t stream) {
  using S = GemmRowsShape<kTiles, NT, kWarps, kInFlight>;
  constexpr auto kernel = gemm_rows_kernel<kTiles, NT, kWarps, kInFlight>;
  allow_shared_memory<kernel>(S::kSharedBytes, "gemm_rows");
  const auto blocks = static_cast<unsigned>((m + S::kRows - 1) / S::kRows);
  launch_dependent("gemm_rows", LaunchRole::kProduct, kernel, blocks, S::kThreads, S::kSharedBytes, stream,
                   static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w), out, n, m, k,
                   f32_out, accumulate);
}

}  // namespace

bool gemm_rows_applies(int64_t n, int64_t k, const void* x, const void* w) {
  return n >= 1 && n <= kGemmRowsMaxRows && k > 0 && k % 32 == 0 && aligned16(x) && aligned16(w);
}

void gemm_rows_bf16(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, GemmOut out_type,
                    bool accumulate, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(gemm_rows_applies(n, k, x, w),
                       "gemm_rows: %lld rows of k=%lld (at most %d rows, k a multiple of 32, 16-byte aligned)",
                       static_cast<long long>(n), static_cast<long long>(k), kGemmRowsMaxRows);
  const bool f32 = out_type == GemmOut::f32;
  const int rows = static_cast<int>(n);
  if (rows <= 8) return launch<1>(x, w, out, rows, m, k, f32, accumulate, stream);
  if (rows <= 16) return launch<2>(x, w, out, rows, m, k, f32, accumulate, stream);
  if (rows <= 32) return launch<4>(x, w, out, rows, m, k, f32, accumulate, stream);
  return launch<8>(x, w, out, rows, m, k, f32, accumulate, stream);
}

}  // namespace exactly::kernels::cuda
