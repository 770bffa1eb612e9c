// The windowed path of exact_rows_attention (exact_rows_window.cu): a CTA of
// eight warps per row group that scores two key tiles at once and keeps only
// O's chain sequential. The launcher in exact_rows.cu decides between it and
// the one-kernel path; both give the prefill kernel's bits.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/exact_rows_common.cuh"

namespace exactly::kernels::cuda {

// One CTA per (sequence, KV head, row group of 16 packed rows).
void exact_rows_windows(const ExactRowsParams& p, int n_seqs, int row_groups, int head_dim, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
