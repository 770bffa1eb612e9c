// Attention rows in the Hopper prefill kernel's order, bit for bit, for the
// rows a decode step brings (one query token per sequence, or a few).
//
// The prefill kernel computes a row as a chain of fixed steps: 128-key tiles
// from key 0 upwards; per tile the scores S = Q Kᵀ as tensor-core k16 steps
// over the head dim, the online softmax of online_softmax.cuh (in the
// per-thread layout of the mma.m16n8k16 accumulator), P rounded to bf16,
// O *= the tile's correction, then O += P V as k16 steps over the tile's
// keys; at the end O / l rounded to bf16. mma.sync m16n8k16 gives the same
// bits as wgmma for the same k16 chain (dev/cuda/order_lab.cu), and one warp
// of m16n8k16 holds exactly one warp's share of the wgmma accumulator, so
// warps running these steps on 16 rows reproduce the prefill kernel's rows.
// Rows are independent, so a CTA packs the query heads of one KV group (and
// the tokens of a short query) into its 16 rows. There is no split of the
// keys, since the prefill kernel has none.
//
// This file is the one-kernel path, which a large batch fills the GPU with;
// a smaller batch takes the windowed path (exact_rows_window.cu), which gives
// a row group eight warps and two tiles at a time. Both give the same bits.
//
// The work of one KV head is spread over a CTA of four warps, so that
// latency is hidden by warps rather than left to one:
// - the copies: K and V stream through a ring in shared memory in 32-key
//   chunks (cp.async through the block table); 128 threads share a chunk, a
//   thread keeps one 16-byte column and walks its rows by a stride, and a
//   chunk's one or two blocks are found with one division per chunk;
// - S = Q Kᵀ: warp w computes the 8-key n-tile w of each chunk (the same
//   k16 chain over D as any warp would), then every warp reads the whole
//   tile's scores back from shared memory in the accumulator layout, so all
//   four run the softmax on the same values and get the same P and row sums;
// - O += P V: warp w owns D / 4 of O's columns.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/exact_rows_common.cuh"
#include "kernels/cuda/exact_rows_split.h"
#include "kernels/cuda/exact_rows_window.h"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/online_softmax.cuh"

namespace exactly::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;

// 128 keys per tile: the prefill kernel's (flash_prefill.cu, kSm90BN). A
// ring of four 32-key chunks: a deeper one (16) measured the same, since a
// CTA's time goes to its chain of steps per tile, not to memory latency.
constexpr int kBN = 128, kChunkKeys = 32, kChunksPerTile = kBN / kChunkKeys, kRing = 4, kWarps = 4;

template <int D>
__global__ void __launch_bounds__(kWarps * 32) exact_rows_kernel(const ExactRowsParams p) {
  release_dependents();  // the output product may start streaming its weights
  constexpr int kChunkBytes = kChunkKeys * D * 2, kPieces = D / 8;
  __shared__ __align__(128) uint8_t ring[kRing * kChunkBytes];
  __shared__ float scores[16][kBN + 4];  // a tile's S, row by key (padded against bank conflicts)
  const int s = blockIdx.x, kv_head = blockIdx.y, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, c = lane % 4, q_mat = lane / 8, q_row = lane % 8;
  const RowGroup rg(p, s, blockIdx.z);
  if (rg.empty()) return;
  const int ctx_len = rg.ctx_len;
  const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;
  uint32_t qf[D / 16][4];
  load_q_fragments<D>(qf, p, rg, kv_head, lane);
  const int pos_lo = rg.position(p, g), pos_hi = rg.position(p, g + 8);

  // A thread's copies: its 16-byte column of every (threads / pieces)-th row.
  const int my_piece = tid % kPieces, my_row0 = tid / kPieces;
  constexpr int kRowStep = kWarps * 32 / kPieces;
  const int64_t head_stride = int64_t{p.n_kv_heads} * D;
  const int n_tiles = (ctx_len + kBN - 1) / kBN;
  const int n_chunks = n_tiles * 2 * kChunksPerTile;
  const uint32_t ring_addr = smem_address(ring);
  auto issue = [&](int i) {
    if (i < n_chunks) {
      const int tile = i / (2 * kChunksPerTile), j = i % (2 * kChunksPerTile);
      const bf16* pool = (j >= kChunksPerTile ? p.v_cache : p.k_cache) + int64_t{kv_head} * D + my_piece * 8;
      const int key0 = tile * kBN + (j % kChunksPerTile) * kChunkKeys;
      const int block0 = key0 / p.block_size, first = key0 - block0 * p.block_size;
      const int64_t e0 = table[block0];
      const int64_t e1 = first + kChunkKeys > p.block_size && key0 + p.block_size - first < ctx_len
                             ? int64_t{table[block0 + 1]}
                             : e0;
      const uint32_t slot_addr = ring_addr + (i % kRing) * kChunkBytes;
#pragma unroll
      for (int j = 0; j < kChunkKeys / kRowStep; ++j) {
        const int r = my_row0 + j * kRowStep, within = first + r;
        const bool valid = key0 + r < ctx_len;
        const int64_t slot = within < p.block_size ? e0 * p.block_size + within
                                                   : e1 * p.block_size + (within - p.block_size);
        cp_async_16(slot_addr + swizzled(r, my_piece, D * 2), pool + (valid ? slot : 0) * head_stride, valid);
      }
    }
    cp_async_commit();
  };
  for (int i = 0; i < kRing - 1; ++i) issue(i);

  OnlineSoftmax<kBN> sm;
  constexpr int kMyCols = D / kWarps;  // O columns of this warp
  float o[kMyCols / 2];
#pragma unroll
  for (int i = 0; i < kMyCols / 2; ++i) o[i] = 0.f;
  float sc[kBN / 2];
  uint32_t pk[kBN / 16][4];
  int next = kRing - 1;
  for (int tile = 0; tile < n_tiles; ++tile) {
#pragma unroll
    for (int ch = 0; ch < kChunksPerTile; ++ch) {
      cp_async_wait<kRing - 2>();
      __syncthreads();
      const uint32_t chunk = ring_addr + ((tile * 2 * kChunksPerTile + ch) % kRing) * kChunkBytes;
      float acc[4] = {0.f, 0.f, 0.f, 0.f};  // n-tile `warp` of the chunk: keys 8 warp ..
#pragma unroll
      for (int ks = 0; ks < D / 16; ks += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, chunk + swizzled(warp * 8 + q_row, 2 * ks + q_mat, D * 2));
        Elem<bf16>::mma(acc, qf[ks], b[0], b[1]);
        Elem<bf16>::mma(acc, qf[ks + 1], b[2], b[3]);
      }
      const int key = ch * kChunkKeys + warp * 8 + 2 * c;
      scores[g][key] = acc[0];
      scores[g][key + 1] = acc[1];
      scores[g + 8][key] = acc[2];
      scores[g + 8][key + 1] = acc[3];
      __syncthreads();  // the slot is read; the scores are written
      issue(next++);
    }
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i)  // the accumulator layout of the whole tile
      sc[i] = scores[g + 8 * ((i % 4) / 2)][(i / 4) * 8 + 2 * c + (i & 1)];
    const int key0 = tile * kBN;
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) {
      const int key = key0 + (i / 4) * 8 + c * 2 + (i & 1);
      const int pos = (i % 4) < 2 ? pos_lo : pos_hi;
      if (key >= ctx_len || key > pos) sc[i] = -INFINITY;
    }
    sm.update(sc, p.scale_log2);
    pack_probabilities(sc, pk);
    sm.rescale(o);  // the first (kMyCols / 2) accumulators: correction by row, as for the whole O
#pragma unroll
    for (int ch = 0; ch < kChunksPerTile; ++ch) {
      cp_async_wait<kRing - 2>();
      __syncthreads();
      const uint32_t chunk =
          ring_addr + ((tile * 2 * kChunksPerTile + kChunksPerTile + ch) % kRing) * kChunkBytes;
#pragma unroll
      for (int dt = 0; dt < kMyCols / 8; dt += 2) {
        const int col_tile = warp * (kMyCols / 8) + dt;  // 8-column tile of D
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, chunk + swizzled(16 * kk + (q_mat % 2) * 8 + q_row, col_tile + q_mat / 2, D * 2));
          float o0[4] = {o[4 * dt], o[4 * dt + 1], o[4 * dt + 2], o[4 * dt + 3]};
          float o1[4] = {o[4 * dt + 4], o[4 * dt + 5], o[4 * dt + 6], o[4 * dt + 7]};
          Elem<bf16>::mma(o0, pk[2 * ch + kk], b[0], b[1]);
          Elem<bf16>::mma(o1, pk[2 * ch + kk], b[2], b[3]);
#pragma unroll
          for (int e = 0; e < 4; ++e) o[4 * dt + e] = o0[e], o[4 * dt + 4 + e] = o1[e];
        }
      }
      __syncthreads();
      issue(next++);
    }
  }
  cp_async_wait<0>();
  const float inv[2] = {sm.inverse_sum(0), sm.inverse_sum(1)};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    bf16* dst = rg.row(p.out, p, kv_head, g + 8 * r, D);
    if (dst == nullptr) continue;
#pragma unroll
    for (int dt = 0; dt < kMyCols / 8; ++dt)
      *reinterpret_cast<uint32_t*>(dst + warp * kMyCols + 8 * dt + 2 * c) =
          Elem<bf16>::pack(o[4 * dt + 2 * r] * inv[r], o[4 * dt + 2 * r + 1] * inv[r]);
  }
}

// sm_90: the machine code of the cluster path and of the split chain's producers.
bool split_runs_unforced() { return device_compute_major() == 9; }

// EXACTLY_EXACT_ROWS (one, windows, cluster, split) forces a path where the caller
// leaves the choice: engine-level comparisons of paths with the same bits.
ExactRowsPath forced_path() {
  static const ExactRowsPath forced = [] {
    const char* v = std::getenv("EXACTLY_EXACT_ROWS");
    const std::string name = v != nullptr ? v : "";
    if (name == "one") return ExactRowsPath::kOneKernel;
    if (name == "windows") return ExactRowsPath::kWindows;
    if (name == "cluster") return ExactRowsPath::kCluster;
    if (name == "split") return ExactRowsPath::kSplit;
    return ExactRowsPath::kAuto;
  }();
  return forced;
}

template <int D>
void launch(const ExactRowsParams& p, const AttentionBatchDevice& b, cudaStream_t stream) {
  const int group_rows = b.max_query_len * p.group;
  const dim3 grid(static_cast<unsigned>(b.n_seqs), static_cast<unsigned>(p.n_kv_heads),
                  static_cast<unsigned>((group_rows + 15) / 16));
  exact_rows_kernel<D><<<grid, kWarps * 32, 0, stream>>>(p);
  check_launch("exact_rows_attention");
}

}  // namespace

void exact_rows_attention(const PagedKVDevice& cache, const AttentionBatchDevice& batch, const void* q, int n_heads,
                          float scale, void* out, cudaStream_t stream, ExactRowsPath path, void* workspace,
                          int64_t workspace_bytes) {
  check_attention_args(cache, batch, q, out, n_heads, "exact_rows_attention");
  EXACTLY_CUDA_REQUIRE(cache.dtype == DType::bf16, "exact_rows_attention: bf16 caches only");
  EXACTLY_CUDA_REQUIRE(batch.max_query_len >= 0 && int64_t{batch.max_query_len} * (n_heads / cache.n_kv_heads) <=
                                                       int64_t{16} * 65535,
                       "exact_rows_attention: %d query tokens of %d heads per KV head", batch.max_query_len,
                       n_heads / cache.n_kv_heads);
  if (batch.n_seqs == 0 || batch.max_query_len <= 0) return;
  if (path == ExactRowsPath::kAuto) path = forced_path();
  const ExactRowsParams p = paged_attention_params<__nv_bfloat16>(cache, batch, q, out, n_heads, scale);
  const int row_groups = (batch.max_query_len * p.group + 15) / 16;
  const int64_t groups = int64_t{batch.n_seqs} * cache.n_kv_heads * row_groups;
  const int64_t split_bytes = exact_rows_split_bytes(batch.n_seqs, cache.n_kv_heads, p.group, batch.max_query_len,
                                                     batch.max_seq_len);
  const ExactRowsShape shape{groups, cache.head_dim, batch.max_seq_len, exact_rows_cluster_size(batch.max_seq_len),
                             workspace != nullptr && split_bytes <= workspace_bytes};
  static const ExactRowsDevice device{split_runs_unforced(), device_multiprocessors(), exact_rows_split_chain_slots()};
  switch (exact_rows_route(path, shape, device)) {
    case ExactRowsKernel::kSplit:
      return exact_rows_split(cache, batch, q, n_heads, scale, out, workspace, workspace_bytes, stream);
    case ExactRowsKernel::kCluster:
      return exact_rows_cluster(p, batch.n_seqs, row_groups, batch.max_seq_len, cache.head_dim, stream);
    case ExactRowsKernel::kPrefillKernel:
      return flash_attention_prefill(cache, batch, q, n_heads, scale, true, out, stream);
    case ExactRowsKernel::kWindows: return exact_rows_windows(p, batch.n_seqs, row_groups, cache.head_dim, stream);
    case ExactRowsKernel::kOneKernel: break;
  }
  with_head_dim(cache.head_dim, [&](auto d) { launch<decltype(d)::value>(p, batch, stream); });
}

int64_t exact_rows_workspace_bytes(int n_kv_heads, int group, int max_seq_len) {
  const bool forced = forced_path() == ExactRowsPath::kSplit;
  const bool unforced = split_runs_unforced() && max_seq_len >= kExactSplitShortKeys;
  if (!(forced || unforced)) return 0;
  // Contexts past kExactSplitMaxKeys take other paths: a model's longer
  // limit still leaves the split path its shorter ones.
  const int keys = std::min(max_seq_len, kExactSplitMaxKeys);
  const int64_t seqs = kExactSplitMaxGroups / (int64_t{n_kv_heads} * ((group + 15) / 16));
  return seqs == 0 ? 0 : exact_rows_split_bytes(static_cast<int>(seqs), n_kv_heads, group, 1, keys);
}

}  // namespace exactly::kernels::cuda
