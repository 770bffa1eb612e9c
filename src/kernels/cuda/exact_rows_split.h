// The split path of exact_rows_attention (exact_rows_split.cu): the rows'
// scores by key tile across the GPU, then the prefill kernel's chain over
// them by O's columns. The launcher in exact_rows.cu decides between it and
// the one-kernel path; both give the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/exact_rows_common.cuh"

namespace exactly::kernels::cuda {

// How the scores of a batch lie in the workspace: row groups of 16 packed
// rows per (sequence, KV head), rows stored per group, keys per row (whole
// 128-key tiles).
struct ExactSplitShape {
  int row_groups, row_cap, key_cap;
};
ExactSplitShape exact_split_shape(int group, int max_query_len, int max_seq_len);
int64_t exact_split_bytes(int n_seqs, int n_kv_heads, const ExactSplitShape& shape);

void exact_rows_split(ExactRowsParams p, int n_seqs, int max_query_len, int max_seq_len, int head_dim,
                      void* workspace, int64_t workspace_bytes, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
