// CUDA attention over the paged KV cache: FlashAttention for prefill (and any
// request computing several tokens: chunked prefill, speculative verify),
// split-KV paged decode, the KV store through the slot mapping and the
// batched block copy of copy-on-write. Same layouts as the CPU kernels
// (kernels/ops.h), in 16-bit elements:
//   cache K, V : [num_blocks, block_size, n_kv_heads, head_dim]
//   q, out     : [n_tokens, n_heads, head_dim]
// All pointers are device pointers unless named host_. Launches are
// asynchronous on `stream`; argument errors throw exactly::Error before any
// launch, launch errors throw with the CUDA error string.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/exact_rows_route.h"

namespace exactly::kernels::cuda {

enum class DType : int { bf16 = 0, f16 = 1 };

struct PagedKVDevice {
  void* k;
  void* v;
  int64_t num_blocks;
  int block_size;  // a multiple of 16
  int n_kv_heads;
  int head_dim;  // 64 or 128
  DType dtype;
};

struct AttentionBatchDevice {
  int32_t n_seqs;
  const int32_t* query_start;   // [n_seqs + 1]
  const int32_t* seq_lens;      // [n_seqs] context length, cached + new
  const int32_t* block_tables;  // [n_seqs, max_blocks_per_seq]
  int32_t max_blocks_per_seq;
  int32_t max_query_len;  // host-known bound on query_start[s+1] - query_start[s]
  int32_t max_seq_len;    // host-known bound on seq_lens[s]
  // Rows of q (tokens x n_heads x head_dim) that may be read: at least
  // query_start[n_seqs], at most what the buffer holds. The Hopper prefill
  // kernel at head dim 128 copies queries in 128-row boxes and needs it; rows
  // past it read as zeros.
  int64_t q_rows = 0;
};

// Causal (or unmasked) attention for a flattened batch of query tokens: token
// j of sequence s sits at position seq_lens[s] - q_len(s) + j. scale is
// usually 1/sqrt(head_dim). On Hopper (bf16, head dim 64 or 128) a persistent
// warp-specialised TMA + wgmma kernel (it keeps one small scheduling counter
// per stream for the life of the process, and once a launch without a causal
// mask has run, 68 KB per SM of partial results), elsewhere a tensor-core (mma.sync)
// kernel, sm_80 and later. The Hopper kernel copies whole 16-slot groups of the last block, so
// slots past a sequence's length must hold finite values (masked, but 0 * NaN
// is NaN): zero the pool when allocating it.
void flash_attention_prefill(const PagedKVDevice& cache, const AttentionBatchDevice& batch, const void* q,
                             int n_heads, float scale, bool causal, void* out, cudaStream_t stream);

// Decode: exactly one query token per sequence (query_start = 0, 1, ..., n).
// Keys are split into partitions processed in parallel and merged by
// log-sum-exp. A batch with six CTAs per SM in 1024-key partitions uses
// those, one that fills the GPU with 512-key partitions uses them, and a
// smaller one sizes each sequence's partitions from that sequence's length
// (decode_partition), so that a lone short sequence still spreads over many
// SMs (at batch 1 a 512-key partition left 16 CTAs walking 512 keys each:
// docs/journal/benchmarks-record.md §6). A row's bits may therefore depend on
// the batch, as the products' do outside --deterministic, which does not use
// this kernel.
// workspace must hold decode_workspace_bytes(...) bytes.
__host__ __device__ constexpr int decode_partition(int ctx_len) {
  return ctx_len <= 1024 ? 128 : ctx_len <= 4096 ? 256 : 512;
}
// The most partitions any sequence of at most max_seq_len keys is split into.
constexpr int decode_partitions_bound(int max_seq_len) {
  const int short_parts = (std::min(max_seq_len, 1024) + 127) / 128;
  const int mid_parts = max_seq_len > 1024 ? (std::min(max_seq_len, 4096) + 255) / 256 : 0;
  const int long_parts = max_seq_len > 4096 ? (max_seq_len + 511) / 512 : 0;
  return std::max(short_parts, std::max(mid_parts, long_parts));
}
// Graphs of decode steps are captured per context bound, a multiple of this.
inline constexpr int kDecodeContextGranule = 512;
int64_t decode_workspace_bytes(int n_seqs, int n_heads, int max_seq_len, int head_dim);
void paged_decode_attention(const PagedKVDevice& cache, const AttentionBatchDevice& batch, const void* q,
                            int n_heads, float scale, void* out, void* workspace, int64_t workspace_bytes,
                            cudaStream_t stream);

// Rows of few query tokens (decode steps, short verifies) with the bits of
// the Hopper prefill kernel (flash_attention_prefill's causal path): the same
// 128-key tiles from key 0, the same online softmax and rounding, on
// mma.sync with 16 packed rows per KV head. bf16 caches, head dim 64 or 128.
// Under canonical products the engine sends decode rows here, so that a
// row's bits do not depend on the kernel that its step chose. A large batch
// runs one kernel whose CTA of four warps walks a row group's tiles one at a
// time; a smaller one gives each row group eight warps that score two tiles
// at once (the windows), with only O's chain over the tiles left sequential,
// or on Hopper a cluster that passes the chain from SM to SM; a few row
// groups over long contexts (head dim 128) run in the prefill kernel itself;
// with a workspace, on Hopper few row groups over long contexts spread each
// group's keys over the GPU (exact_rows_split.h). exact_rows_route.h decides
// (kAuto) or takes a forced path. The same bits every way.
void exact_rows_attention(const PagedKVDevice& cache, const AttentionBatchDevice& batch, const void* q, int n_heads,
                          float scale, void* out, cudaStream_t stream, ExactRowsPath path = ExactRowsPath::kAuto,
                          void* workspace = nullptr, int64_t workspace_bytes = 0);
// Workspace bytes that let exact_rows_attention take its split path for
// every batch of decode rows of at most max_seq_len keys that it would split
// (0 where it splits none).
int64_t exact_rows_workspace_bytes(int n_kv_heads, int group, int max_seq_len);

// k, v: [n_tokens, n_kv_heads, head_dim]; slot = block * block_size + offset,
// a negative slot skips its token (padding).
void kv_store(const PagedKVDevice& cache, const void* k, const void* v, const int64_t* slot_mapping,
              int64_t n_tokens, cudaStream_t stream);

// For each layer l and pair i, copies block pairs[2i] to block pairs[2i+1] in
// caches[l] (K and V). caches: device array of n_layers {k, v} pointers.
void copy_blocks(void* const* layer_k, void* const* layer_v, int n_layers, const int64_t* pairs, int64_t n_pairs,
                 int block_size, int n_kv_heads, int head_dim, DType dtype, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
