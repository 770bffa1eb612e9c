// exact_rows_attention's split path: the same bits as the one-kernel path
// (and so as the Hopper prefill kernel), with the keys spread over the GPU.
//
// In the prefill kernel's chain only O and the softmax state carry from one
// 128-key tile to the next; the scores S = Q Kᵀ of a tile depend on nothing
// but Q and the tile's keys. So the chain is cut in two launches:
// - exact_scores_kernel: one CTA per (tile, KV head, row group) computes the
//   tile's scores with the one-kernel path's k16 chains over D, masks them
//   (-inf) and stores them in fp32 in the workspace: every key tile of every
//   sequence at once, reading K from all SMs;
// - exact_chain_kernel: one warp per (kCols columns of O, KV head, row
//   group) walks the tiles in order from key 0, running on the stored scores
//   the online softmax of online_softmax.cuh (the same values in every warp,
//   so the same P and row sums) and O += P V as k16 steps over the tile's
//   keys for its columns, then O / l rounded to bf16.
// What a tile costs the chain is a softmax over stored scores and eight k16
// steps; its K and the products over D moved to the first launch.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/exact_rows_common.cuh"
#include "kernels/cuda/exact_rows_split.h"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/online_softmax.cuh"

namespace exactly::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kTileKeys = 128;  // the prefill kernel's tile (flash_prefill.cu, kSm90BN)
constexpr int kScoreWarps = 4;  // a warp scores 32 keys of the tile
constexpr int kChainCols = 16;  // O columns per chain warp
constexpr int kChainStages = 4;
// A tile's stored scores in shared memory: 16 rows of 136 floats (8 of them
// padding), so that the 8-byte reads of the accumulator layout hit distinct
// banks.
constexpr int kScoreStride = kTileKeys + 8;

__device__ __forceinline__ float* scores_of(const ExactRowsParams& p, int s, int kv_head, int group_index) {
  return p.scores + ((int64_t{s} * p.n_kv_heads + kv_head) * p.row_groups + group_index) * p.row_cap *
                        int64_t{p.key_cap};
}

template <int D>
__global__ void __launch_bounds__(kScoreWarps * 32) exact_scores_kernel(const ExactRowsParams p) {
  constexpr int kPieces = D / 8, kRowStep = kScoreWarps * 32 / kPieces;
  __shared__ __align__(128) uint8_t keys[kTileKeys * D * 2];
  __shared__ int32_t blocks[kTileKeys / 16 + 1];  // the tile's block-table entries (blocks of 16 keys or more)
  wait_for_predecessor();
  const int tile = blockIdx.x, kv_head = blockIdx.y, s = blockIdx.z / p.row_groups;
  const int group_index = blockIdx.z % p.row_groups;
  const RowGroup rg(p, s, group_index);
  const int key0 = tile * kTileKeys;
  if (rg.empty() || key0 >= rg.ctx_len) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, c = lane % 4, q_mat = lane / 8, q_row = lane % 8;
  const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;
  const int piece = tid % kPieces;
  const uint32_t base = smem_address(keys);
  const int64_t head_stride = int64_t{p.n_kv_heads} * D;
  const bf16* pool = p.k + int64_t{kv_head} * D + piece * 8;
  // One read of the block table per tile, not one per row: each would stand
  // between a thread and its next copy.
  const int first_block = key0 / p.block_size;
  if (tid <= (min(key0 + kTileKeys, rg.ctx_len) - 1) / p.block_size - first_block)
    blocks[tid] = table[first_block + tid];
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kTileKeys / kRowStep; ++j) {
    const int r = tid / kPieces + j * kRowStep, key = key0 + r;
    const bool valid = key < rg.ctx_len;
    const int block = key / p.block_size;
    const int64_t slot = valid ? int64_t{blocks[block - first_block]} * p.block_size + (key - block * p.block_size) : 0;
    cp_async_16(base + swizzled(r, piece, D * 2), pool + slot * head_stride, valid);
  }
  cp_async_commit();
  uint32_t qf[D / 16][4];
  load_q_fragments<D>(qf, p, rg, kv_head, lane);
  cp_async_wait<0>();
  __syncthreads();
  float acc[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ks += 2) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // n-tile j of the warp's 32 keys, one k16 chain over D each
      uint32_t b[4];
      ldmatrix_x4(b, base + swizzled(32 * warp + 8 * j + q_row, 2 * ks + q_mat, D * 2));
      Elem<bf16>::mma(acc[j], qf[ks], b[0], b[1]);
      Elem<bf16>::mma(acc[j], qf[ks + 1], b[2], b[3]);
    }
  }
  float* out = scores_of(p, s, kv_head, group_index);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    if (rg.row0 + row >= rg.rows) continue;
    const int pos = rg.position(p, row);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int key = key0 + 32 * warp + 8 * j + 2 * c;
      float2 v{acc[j][2 * r], acc[j][2 * r + 1]};
      if (key >= rg.ctx_len || key > pos) v.x = -INFINITY;
      if (key + 1 >= rg.ctx_len || key + 1 > pos) v.y = -INFINITY;
      *reinterpret_cast<float2*>(out + int64_t{row} * p.key_cap + key) = v;
    }
  }
}

constexpr int kChainVRow = kChainCols * 2, kChainVBytes = kTileKeys * kChainVRow;
// A stage of the chain's ring: a tile's scores of row_cap rows, then its V
// columns.
__host__ __device__ constexpr int chain_score_bytes(int row_cap) { return row_cap * kScoreStride * 4; }
__host__ __device__ constexpr int chain_stage_bytes(int row_cap) { return chain_score_bytes(row_cap) + kChainVBytes; }
// Block-table entries a chain warp keeps in shared memory (8,192 keys in
// blocks of 16), read again only when its copies run past them.
constexpr int kChainTableWindow = 512;

template <int D>
__global__ void __launch_bounds__(32) exact_chain_kernel(const ExactRowsParams p) {
  constexpr int kVRow = kChainVRow, kVPieces = kVRow / 16;
  constexpr int kNT = kChainCols / 8;  // 8-column n-tiles of the warp's O
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ int32_t window[kChainTableWindow];
  const int kScoreBytes = chain_score_bytes(p.row_cap), kStageBytes = chain_stage_bytes(p.row_cap);
  wait_for_predecessor();
  const int col0 = blockIdx.x * kChainCols, kv_head = blockIdx.y, s = blockIdx.z / p.row_groups;
  const int group_index = blockIdx.z % p.row_groups;
  const RowGroup rg(p, s, group_index);
  if (rg.empty()) return;
  const int lane = threadIdx.x, g = lane / 4, c = lane % 4, q_mat = lane / 8, q_row = lane % 8;
  const int here = min(16, rg.rows - rg.row0);  // rows of the group that exist
  const float* scores = scores_of(p, s, kv_head, group_index);
  const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;
  const int64_t head_stride = int64_t{p.n_kv_heads} * D;
  const bf16* vpool = p.v + int64_t{kv_head} * D + col0;
  const int n_tiles = (rg.ctx_len + kTileKeys - 1) / kTileKeys;
  const uint32_t ring_addr = smem_address(ring);
  const int n_blocks = (rg.ctx_len + p.block_size - 1) / p.block_size;
  int window0 = -kChainTableWindow;  // the block index of window[0] (the same in every lane)
  auto ensure_window = [&](int first, int last) {
    if (first >= window0 && last < window0 + kChainTableWindow) return;
    __syncwarp();
    window0 = first;
    for (int i = lane; i < kChainTableWindow && window0 + i < n_blocks; i += 32) window[i] = table[window0 + i];
    __syncwarp();
  };
  auto issue = [&](int t) {
    if (t < n_tiles) {
      const uint32_t stage = ring_addr + (t % kChainStages) * kStageBytes;
      ensure_window(t * kTileKeys / p.block_size, (min((t + 1) * kTileKeys, rg.ctx_len) - 1) / p.block_size);
      for (int r = 0; r < here; ++r)  // a row's 128 scores: 32 pieces of 16 bytes
        cp_async_16(stage + r * kScoreStride * 4 + lane * 16, scores + int64_t{r} * p.key_cap + t * kTileKeys + lane * 4,
                    true);
#pragma unroll
      for (int i = lane; i < kTileKeys * kVPieces; i += 32) {
        const int key_local = i / kVPieces, piece = i % kVPieces, key = t * kTileKeys + key_local;
        const bool valid = key < rg.ctx_len;
        const int block = key / p.block_size;
        const int64_t slot =
            valid ? int64_t{window[block - window0]} * p.block_size + (key - block * p.block_size) : 0;
        cp_async_16(stage + kScoreBytes + key_local * kVRow + piece * 16, vpool + slot * head_stride + piece * 8,
                    valid);
      }
    }
    cp_async_commit();
  };
  for (int i = 0; i < kChainStages - 1; ++i) issue(i);

  OnlineSoftmax<kTileKeys> sm;
  float o[kNT][4];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
  float sc[kTileKeys / 2];
  uint32_t pk[kTileKeys / 16][4];
  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<kChainStages - 2>();
    __syncwarp();
    const int stage = t % kChainStages;
    const float* stored = reinterpret_cast<const float*>(ring + stage * kStageBytes);
#pragma unroll
    for (int i = 0; i < kTileKeys / 2; i += 2) {  // the accumulator layout: pairs of adjacent keys
      const int row = g + 8 * ((i % 4) / 2), key = (i / 4) * 8 + 2 * c;
      const float2 v = row < here ? *reinterpret_cast<const float2*>(stored + row * kScoreStride + key)
                                  : float2{-INFINITY, -INFINITY};
      sc[i] = v.x;
      sc[i + 1] = v.y;
    }
    if (here <= 8)  // rows g + 8 do not exist: half the exponentials
      sm.update<1>(sc, p.scale_log2);
    else
      sm.update(sc, p.scale_log2);
    pack_probabilities(sc, pk);
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)  // O *= the tile's correction, by row
#pragma unroll
      for (int e = 0; e < 4; ++e) o[nt][e] *= sm.correction[e / 2];
    const uint32_t values = ring_addr + stage * kStageBytes + kScoreBytes;
#pragma unroll
    for (int ks = 0; ks < kTileKeys / 16; ++ks) {
#pragma unroll
      for (int nt = 0; nt < kNT; nt += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, values + (16 * ks + (q_mat % 2) * 8 + q_row) * kVRow + (nt + q_mat / 2) * 16);
        Elem<bf16>::mma(o[nt], pk[ks], b[0], b[1]);
        Elem<bf16>::mma(o[nt + 1], pk[ks], b[2], b[3]);
      }
    }
    __syncwarp();
    issue(t + kChainStages - 1);
  }
  cp_async_wait<0>();
  const float inv[2] = {sm.inverse_sum(0), sm.inverse_sum(1)};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    bf16* dst = rg.row(p.out, p, kv_head, g + 8 * r, D);
    if (dst == nullptr) continue;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
      *reinterpret_cast<uint32_t*>(dst + col0 + 8 * nt + 2 * c) =
          Elem<bf16>::pack(o[nt][2 * r] * inv[r], o[nt][2 * r + 1] * inv[r]);
  }
}

template <int D>
void launch(const ExactRowsParams& p, int n_seqs, int max_seq_len, cudaStream_t stream) {
  const unsigned z = static_cast<unsigned>(n_seqs * p.row_groups);
  const unsigned tiles = static_cast<unsigned>((max_seq_len + kTileKeys - 1) / kTileKeys);
  launch_dependent("exact_rows_attention: scores", LaunchRole::kOther, exact_scores_kernel<D>,
                   dim3(tiles, static_cast<unsigned>(p.n_kv_heads), z), kScoreWarps * 32, 0, stream, p);
  const int ring_bytes = kChainStages * chain_stage_bytes(p.row_cap);
  allow_shared_memory<exact_chain_kernel<D>>(kChainStages * chain_stage_bytes(16), "exact_rows_attention: chain");
  launch_dependent("exact_rows_attention: chain", LaunchRole::kOther, exact_chain_kernel<D>,
                   dim3(D / kChainCols, static_cast<unsigned>(p.n_kv_heads), z), 32, ring_bytes, stream, p);
}

}  // namespace

ExactSplitShape exact_split_shape(int group, int max_query_len, int max_seq_len) {
  const int rows = std::max(1, max_query_len * group);
  return {(rows + 15) / 16, std::min(16, rows), (std::max(1, max_seq_len) + kTileKeys - 1) / kTileKeys * kTileKeys};
}

int64_t exact_split_bytes(int n_seqs, int n_kv_heads, const ExactSplitShape& shape) {
  return int64_t{n_seqs} * n_kv_heads * shape.row_groups * shape.row_cap * int64_t{shape.key_cap} *
         int64_t{sizeof(float)};
}

void exact_rows_split(ExactRowsParams p, int n_seqs, int max_query_len, int max_seq_len, int head_dim,
                      void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  const ExactSplitShape shape = exact_split_shape(p.group, max_query_len, max_seq_len);
  const int64_t need = exact_split_bytes(n_seqs, p.n_kv_heads, shape);
  EXACTLY_CUDA_REQUIRE(workspace != nullptr && workspace_bytes >= need,
                       "exact_rows_attention: workspace of %lld bytes, %lld needed", (long long)workspace_bytes,
                       (long long)need);
  EXACTLY_CUDA_REQUIRE(int64_t{n_seqs} * shape.row_groups <= 65535,
                       "exact_rows_attention: %d sequences of %d row groups", n_seqs, shape.row_groups);
  p.scores = static_cast<float*>(workspace);
  p.row_groups = shape.row_groups;
  p.row_cap = shape.row_cap;
  p.key_cap = shape.key_cap;
  with_head_dim(head_dim, [&](auto d) { launch<decltype(d)::value>(p, n_seqs, max_seq_len, stream); });
}

}  // namespace exactly::kernels::cuda
