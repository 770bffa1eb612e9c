// Products of up to kGemmMmaRowsMax rows in the canonical order of gemm.h on
// mma.sync, the weight streamed from global memory straight into the tensor
// cores' fragments: no shared memory, no copy engine, so a launch costs what
// a streaming matrix-vector kernel's does. See gemm_mma_rows.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/gemm.h"

namespace exactly::kernels::cuda {

inline constexpr int kGemmMmaRowsMax = 16;

// x and w 4-byte aligned, k a multiple of 16, 1 <= m <= kGemmMmaRowsMax.
bool gemm_mma_rows_applies(int64_t m, int64_t n_out, int64_t k, const void* x, const void* w);

// out[m, n_out] = x[m, k] · w[n_out, k]^T (+ out when accumulate; f32 only).
void gemm_mma_rows_bf16(const void* x, const void* w, void* out, int64_t m, int64_t n_out, int64_t k,
                        GemmOut out_type, bool accumulate, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
