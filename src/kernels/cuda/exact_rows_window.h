// The windowed paths of exact_rows_attention (exact_rows_window.cu,
// exact_rows_cluster.cu): a CTA of eight warps per row group that scores two
// key tiles at once and keeps only O's chain sequential, alone or in a
// cluster. The launcher in exact_rows.cu decides between them and the
// one-kernel path; all give the prefill kernel's bits.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/exact_rows_common.cuh"

namespace exactly::kernels::cuda {

// One CTA per (sequence, KV head, row group of 16 packed rows).
void exact_rows_windows(const ExactRowsParams& p, int n_seqs, int row_groups, int head_dim, cudaStream_t stream);

// The cluster path (exact_rows_cluster.cu): the same CTAs, a cluster of them
// per row group, each taking every C-th window of 256 keys and passing the
// chain's state on to the next. C: one CTA per window of the longest
// sequence, at most 8.
// Whether this GPU runs the cluster kernel (Hopper); elsewhere
// exact_rows_cluster runs the windows, with the same bits.
bool exact_rows_cluster_runs();
int exact_rows_cluster_size(int max_seq_len);
void exact_rows_cluster(const ExactRowsParams& p, int n_seqs, int row_groups, int max_seq_len, int head_dim,
                        cudaStream_t stream);

}  // namespace exactly::kernels::cuda
