// Products of up to kGemmRowsMax rows in the canonical order of gemm.h (one
// fp32 accumulator per output, tensor-core k16 steps from k = 0 upwards):
// a row's bits are those of cuBLASLt's kernels without split-K at any row
// count. See gemm_rows.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/gemm.h"

namespace exactly::kernels::cuda {

inline constexpr int kGemmRowsMax = 64;
inline constexpr int kGemmRowsNarrowMax = 8;

// How the weight's rows are tiled: 64 a tile on wgmma's M side (up to
// kGemmRowsMax rows), or 8, 16 or 32 a tile on its N side (up to
// kGemmRowsNarrowMax rows), which gives a narrow weight more tiles than SMs.
// Every tiling sums in the canonical order: the same bits.
enum class RowsTiling : int { kM64 = 0, kN8 = 8, kN16 = 16, kN32 = 32 };
inline constexpr RowsTiling kNarrowTilings[] = {RowsTiling::kN8, RowsTiling::kN16, RowsTiling::kN32};

// x and w 16-byte aligned, k a multiple of 64, 1 <= m <= the tiling's most.
bool gemm_rows_applies(int64_t m, int64_t n_out, int64_t k, const void* x, const void* w,
                       RowsTiling tiling = RowsTiling::kM64);

// out[m, n_out] = x[m, k] · w[n_out, k]^T (+ out when accumulate; f32 only).
void gemm_rows_bf16(const void* x, const void* w, void* out, int64_t m, int64_t n_out, int64_t k, GemmOut out_type,
                    bool accumulate, cudaStream_t stream, RowsTiling tiling = RowsTiling::kM64);

}  // namespace exactly::kernels::cuda
