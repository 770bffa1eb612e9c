// exact_rows_attention's split path: the same bits as the one-kernel path
// (and so as the Hopper prefill kernel), with the keys spread over the GPU.
//
// In the prefill kernel's chain over 128-key tiles only O and the row sums
// carry from one tile to the next, and what a tile adds to them depends on
// its scores and on the running maximum before it, which is the largest
// score of the tiles before it. So the chain is cut into three launches:
// - exact_scores_kernel, one CTA per (tile, KV head, row group): the tile's
//   scores S = Q Kᵀ with the one-kernel path's k16 chains over D, masked
//   (-inf), stored in fp32, and each row's largest;
// - exact_probs_kernel, one warp per (tile, KV head, row group): the running
//   maximum before the tile (the largest of the earlier tiles' largest:
//   fmax is exact, so any order gives it), then online_softmax.cuh's update
//   on the stored scores from that state, which gives the tile's P (packed
//   to bf16 as the P V product takes it), its correction of O and l, and
//   what it adds to each thread's part of l;
// - exact_chain_kernel, one warp per (16 columns of O, KV head, row group):
//   the tiles in order from key 0, each O *= correction, O += P V as k16
//   steps over the tile's keys, l = l * correction + the tile's sum, then
//   O / l rounded to bf16.
// What stays sequential is eight k16 steps and a few multiplies per tile.
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
constexpr int kKSteps = kTileKeys / 16;
constexpr int kScoreWarps = 4;  // a warp scores 32 keys of the tile
constexpr int kChainCols = 16;  // O columns per chain warp
constexpr int kChainStages = 4;
constexpr int kProbBytes = kKSteps * 32 * 16;  // a tile's P fragments: a 16-byte A fragment per lane and k16 step
constexpr int kChainValueBytes = 32 * 16;      // a tile's corrections and sums: 4 floats per lane
constexpr int kVRow = kChainCols * 2, kVPieces = kVRow / 16, kVBytes = kTileKeys * kVRow;
constexpr int kStageBytes = kProbBytes + kChainValueBytes + kVBytes;
// Block-table entries a chain warp keeps in shared memory (8,192 keys in
// blocks of 16), read again only when its copies run past them.
constexpr int kChainTableWindow = 512;

// Where a group's part of each workspace array starts.
struct GroupArrays {
  float* scores;
  float* maxes;
  uint32_t* probs;
  float* chain;
  __device__ GroupArrays(const ExactRowsParams& p, int s, int kv_head, int group_index) {
    const int64_t group = (int64_t{s} * p.n_kv_heads + kv_head) * p.row_groups + group_index;
    const int64_t tiles = p.key_cap / kTileKeys;
    scores = p.scores + group * p.row_cap * int64_t{p.key_cap};
    maxes = p.maxes + group * tiles * 16;
    probs = p.probs + group * tiles * (kProbBytes / 4);
    chain = p.chain + group * tiles * (kChainValueBytes / 4);
  }
};

template <int D>
__global__ void __launch_bounds__(kScoreWarps * 32) exact_scores_kernel(const ExactRowsParams p) {
  constexpr int kPieces = D / 8, kRowStep = kScoreWarps * 32 / kPieces;
  __shared__ __align__(128) uint8_t keys[kTileKeys * D * 2];
  __shared__ int32_t blocks[kTileKeys / 16 + 1];  // the tile's block-table entries (blocks of 16 keys or more)
  __shared__ float warp_max[kScoreWarps][16];
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
  const GroupArrays w(p, s, kv_head, group_index);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    const bool exists = rg.row0 + row < rg.rows;
    const int pos = rg.position(p, row);
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int key = key0 + 32 * warp + 8 * j + 2 * c;
      float2 v{acc[j][2 * r], acc[j][2 * r + 1]};
      if (key >= rg.ctx_len || key > pos) v.x = -INFINITY;
      if (key + 1 >= rg.ctx_len || key + 1 > pos) v.y = -INFINITY;
      mx = fmaxf(mx, fmaxf(v.x, v.y));
      if (exists) *reinterpret_cast<float2*>(w.scores + int64_t{row} * p.key_cap + key) = v;
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    if (c == 0) warp_max[warp][row] = mx;
  }
  __syncthreads();
  if (tid < 16)
    w.maxes[tile * 16 + tid] = fmaxf(fmaxf(warp_max[0][tid], warp_max[1][tid]), fmaxf(warp_max[2][tid], warp_max[3][tid]));
}

template <int D>
__global__ void __launch_bounds__(32) exact_probs_kernel(const ExactRowsParams p) {
  wait_for_predecessor();
  const int tile = blockIdx.x, kv_head = blockIdx.y, s = blockIdx.z / p.row_groups;
  const int group_index = blockIdx.z % p.row_groups;
  const RowGroup rg(p, s, group_index);
  if (rg.empty() || tile * kTileKeys >= rg.ctx_len) return;
  const int lane = threadIdx.x, g = lane / 4, c = lane % 4;
  const int here = min(16, rg.rows - rg.row0);  // rows of the group that exist
  const GroupArrays w(p, s, kv_head, group_index);
  // The softmax state before this tile: no sum yet (what the tile adds is
  // what is stored), the running maximum of each row over the earlier tiles.
  OnlineSoftmax<kTileKeys> sm;
  float before[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) before[r] = -INFINITY;
  for (int u = lane; u < tile; u += 32)
#pragma unroll
    for (int r = 0; r < 16; ++r) before[r] = fmaxf(before[r], w.maxes[u * 16 + r]);
#pragma unroll
  for (int r = 0; r < 16; ++r)
#pragma unroll
    for (int step = 1; step < 32; step *= 2) before[r] = fmaxf(before[r], __shfl_xor_sync(0xffffffffu, before[r], step));
  sm.m_run[0] = before[g];
  sm.m_run[1] = before[g + 8];
  float sc[kTileKeys / 2];
#pragma unroll
  for (int i = 0; i < kTileKeys / 2; i += 2) {  // the accumulator layout: pairs of adjacent keys
    const int row = g + 8 * ((i % 4) / 2), key = tile * kTileKeys + (i / 4) * 8 + 2 * c;
    const float2 v = row < here ? *reinterpret_cast<const float2*>(w.scores + int64_t{row} * p.key_cap + key)
                                : float2{-INFINITY, -INFINITY};
    sc[i] = v.x;
    sc[i + 1] = v.y;
  }
  if (here <= 8)  // rows g + 8 do not exist: half the exponentials
    sm.update<1>(sc, p.scale_log2);
  else
    sm.update(sc, p.scale_log2);
  uint4* probs = reinterpret_cast<uint4*>(w.probs) + int64_t{tile} * kKSteps * 32;
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks)
    probs[ks * 32 + lane] = uint4{Elem<bf16>::pack(sc[8 * ks + 0], sc[8 * ks + 1]),
                                  Elem<bf16>::pack(sc[8 * ks + 2], sc[8 * ks + 3]),
                                  Elem<bf16>::pack(sc[8 * ks + 4], sc[8 * ks + 5]),
                                  Elem<bf16>::pack(sc[8 * ks + 6], sc[8 * ks + 7])};
  reinterpret_cast<float4*>(w.chain)[int64_t{tile} * 32 + lane] =
      float4{sm.correction[0], sm.correction[1], sm.l_run[0], sm.l_run[1]};
}

template <int D>
__global__ void __launch_bounds__(32) exact_chain_kernel(const ExactRowsParams p) {
  constexpr int kNT = kChainCols / 8;  // 8-column n-tiles of the warp's O
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ int32_t window[kChainTableWindow];
  wait_for_predecessor();
  const int col0 = blockIdx.x * kChainCols, kv_head = blockIdx.y, s = blockIdx.z / p.row_groups;
  const int group_index = blockIdx.z % p.row_groups;
  const RowGroup rg(p, s, group_index);
  if (rg.empty()) return;
  const int lane = threadIdx.x, g = lane / 4, c = lane % 4, q_mat = lane / 8, q_row = lane % 8;
  const GroupArrays w(p, s, kv_head, group_index);
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
      const uint8_t* probs = reinterpret_cast<const uint8_t*>(w.probs) + int64_t{t} * kProbBytes;
#pragma unroll
      for (int i = lane; i < kProbBytes / 16; i += 32) cp_async_16(stage + 16 * i, probs + 16 * i, true);
      cp_async_16(stage + kProbBytes + 16 * lane,
                  reinterpret_cast<const uint8_t*>(w.chain) + int64_t{t} * kChainValueBytes + 16 * lane, true);
#pragma unroll
      for (int i = lane; i < kTileKeys * kVPieces; i += 32) {
        const int key_local = i / kVPieces, piece = i % kVPieces, key = t * kTileKeys + key_local;
        const bool valid = key < rg.ctx_len;
        const int block = key / p.block_size;
        const int64_t slot =
            valid ? int64_t{window[block - window0]} * p.block_size + (key - block * p.block_size) : 0;
        cp_async_16(stage + kProbBytes + kChainValueBytes + key_local * kVRow + piece * 16,
                    vpool + slot * head_stride + piece * 8, valid);
      }
    }
    cp_async_commit();
  };
  for (int i = 0; i < kChainStages - 1; ++i) issue(i);

  OnlineSoftmax<kTileKeys> sm;  // only l_run is used: the row sums at the end
  float o[kNT][4];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.f;
  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<kChainStages - 2>();
    __syncwarp();
    const uint32_t stage = ring_addr + (t % kChainStages) * kStageBytes;
    const uint8_t* stage_ptr = ring + (t % kChainStages) * kStageBytes;
    const float4 cv = *reinterpret_cast<const float4*>(stage_ptr + kProbBytes + 16 * lane);
    const float correction[2] = {cv.x, cv.y}, added[2] = {cv.z, cv.w};
#pragma unroll
    for (int r = 0; r < 2; ++r) sm.l_run[r] = sm.l_run[r] * correction[r] + added[r];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)  // O *= the tile's correction, by row
#pragma unroll
      for (int e = 0; e < 4; ++e) o[nt][e] *= correction[e / 2];
    const uint32_t values = stage + kProbBytes + kChainValueBytes;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      const uint4 f = *reinterpret_cast<const uint4*>(stage_ptr + 16 * (ks * 32 + lane));
      const uint32_t pk[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
      for (int nt = 0; nt < kNT; nt += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, values + (16 * ks + (q_mat % 2) * 8 + q_row) * kVRow + (nt + q_mat / 2) * 16);
        Elem<bf16>::mma(o[nt], pk, b[0], b[1]);
        Elem<bf16>::mma(o[nt + 1], pk, b[2], b[3]);
      }
    }
    __syncwarp();
    issue(t + kChainStages - 1);
  }
  cp_async_wait<0>();
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = sm.row_sum(r);
    inv[r] = l > 0.f ? 1.f / l : 0.f;
  }
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
  const unsigned z = static_cast<unsigned>(n_seqs * p.row_groups), heads = static_cast<unsigned>(p.n_kv_heads);
  const unsigned tiles = static_cast<unsigned>((max_seq_len + kTileKeys - 1) / kTileKeys);
  launch_dependent("exact_rows_attention: scores", LaunchRole::kOther, exact_scores_kernel<D>, dim3(tiles, heads, z),
                   kScoreWarps * 32, 0, stream, p);
  launch_dependent("exact_rows_attention: probabilities", LaunchRole::kOther, exact_probs_kernel<D>,
                   dim3(tiles, heads, z), 32, 0, stream, p);
  allow_shared_memory<exact_chain_kernel<D>>(kChainStages * kStageBytes, "exact_rows_attention: chain");
  launch_dependent("exact_rows_attention: chain", LaunchRole::kOther, exact_chain_kernel<D>,
                   dim3(D / kChainCols, heads, z), 32, kChainStages * kStageBytes, stream, p);
}

// The workspace's arrays in order, each a multiple of 16 bytes.
struct SplitLayout {
  int64_t scores, maxes, probs, chain;
  SplitLayout(int n_seqs, int n_kv_heads, const ExactSplitShape& shape) {
    const int64_t groups = int64_t{n_seqs} * n_kv_heads * shape.row_groups, tiles = shape.key_cap / kTileKeys;
    scores = groups * shape.row_cap * int64_t{shape.key_cap} * 4;
    maxes = groups * tiles * 16 * 4;
    probs = groups * tiles * kProbBytes;
    chain = groups * tiles * kChainValueBytes;
  }
  int64_t bytes() const { return scores + maxes + probs + chain; }
};

}  // namespace

ExactSplitShape exact_split_shape(int group, int max_query_len, int max_seq_len) {
  const int rows = std::max(1, max_query_len * group);
  return {(rows + 15) / 16, std::min(16, rows), (std::max(1, max_seq_len) + kTileKeys - 1) / kTileKeys * kTileKeys};
}

int64_t exact_split_bytes(int n_seqs, int n_kv_heads, const ExactSplitShape& shape) {
  return SplitLayout(n_seqs, n_kv_heads, shape).bytes();
}

void exact_rows_split(ExactRowsParams p, int n_seqs, int max_query_len, int max_seq_len, int head_dim,
                      void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  const ExactSplitShape shape = exact_split_shape(p.group, max_query_len, max_seq_len);
  const SplitLayout layout(n_seqs, p.n_kv_heads, shape);
  EXACTLY_CUDA_REQUIRE(workspace != nullptr && workspace_bytes >= layout.bytes(),
                       "exact_rows_attention: workspace of %lld bytes, %lld needed", (long long)workspace_bytes,
                       (long long)layout.bytes());
  EXACTLY_CUDA_REQUIRE(int64_t{n_seqs} * shape.row_groups <= 65535,
                       "exact_rows_attention: %d sequences of %d row groups", n_seqs, shape.row_groups);
  auto* bytes = static_cast<uint8_t*>(workspace);
  p.scores = reinterpret_cast<float*>(bytes);
  p.maxes = reinterpret_cast<float*>(bytes + layout.scores);
  p.probs = reinterpret_cast<uint32_t*>(bytes + layout.scores + layout.maxes);
  p.chain = reinterpret_cast<float*>(bytes + layout.scores + layout.maxes + layout.probs);
  p.row_groups = shape.row_groups;
  p.row_cap = shape.row_cap;
  p.key_cap = shape.key_cap;
  if (head_dim == 64) return launch<64>(p, n_seqs, max_seq_len, stream);
  launch<128>(p, n_seqs, max_seq_len, stream);
}

}  // namespace exactly::kernels::cuda
