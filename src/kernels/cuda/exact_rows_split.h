// The split path of exact_rows_attention (exact_rows_split.cu): the prefill
// kernel's bits for decode rows and short queries, with a row group's keys
// spread over the GPU instead of walked by one CTA. It needs a workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention.h"

namespace exactly::kernels::cuda {

// Bytes of workspace exact_rows_split needs for a batch of at most n_seqs
// sequences, max_query_len query tokens and max_seq_len keys each.
int64_t exact_rows_split_bytes(int n_seqs, int n_kv_heads, int group, int max_query_len, int max_seq_len);

// How many chain CTAs of the split path this GPU runs at once (its ring's
// shared memory decides how many an SM holds): past them the chain runs in
// waves (exact_rows_route.h).
int64_t exact_rows_split_chain_slots();

// exact_rows_attention's rows (the same arguments and bits) in three
// launches: scores by key tile, probabilities by key tile, then O's chain by
// O's columns. workspace: exact_rows_split_bytes(...) bytes or more.
void exact_rows_split(const PagedKVDevice& cache, const AttentionBatchDevice& batch, const void* q, int n_heads,
                      float scale, void* out, void* workspace, int64_t workspace_bytes, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
