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

// x and w 16-byte aligned, k a multiple of 64, 1 <= m <= kGemmRowsMax.
bool gemm_rows_applies(int64_t m, int64_t n_out, int64_t k, const void* x, const void* w);

// out[m, n_out] = x[m, k] · w[n_out, k]^T (+ out when accumulate; f32 only).
void gemm_rows_bf16(const void* x, const void* w, void* out, int64_t m, int64_t n_out, int64_t k, GemmOut out_type,
                    bool accumulate, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
