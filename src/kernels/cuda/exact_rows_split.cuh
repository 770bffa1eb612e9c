// The kernels of exact_rows_attention's split path (exact_rows_split.cu;
// the lab times their variants): the prefill kernel's bits with a row
// group's keys spread over the GPU.
//
// In the prefill kernel's chain over 128-key tiles only O and the row sums
// carry from one tile to the next, and what a tile adds to them depends on
// its scores and on the running maximum before it, which is the largest
// score of the tiles before it (fmax is exact, so any order gives it). So
// the chain is cut into three launches:
// - scores, a CTA per (tile, KV head, row group): S = Q Kᵀ with the k16
//   chains over D that every exact path runs, masked (-inf), stored in fp32
//   with each row's largest;
// - probabilities, a warp per (tile, KV head, row group): online_softmax.cuh's
//   update on the stored scores from the running maximum before the tile and
//   no sum, giving the tile's P as the P V product's mma fragments, its
//   correction of O and l, and what it adds to each lane's part of l;
// - the chain, a warp per (16 columns of O, KV head, row group): the tiles
//   in order from key 0, l = l * correction + the tile's sum, O *= correction,
//   O += P V in eight k16 steps, then O / l rounded to bf16.
// Every instruction of the chain waits on the one before, so the copies of
// its V tiles are kept off its path: on sm_90 a producer warp beside it
// issues them into a ring of 8 tiles; elsewhere the chain issues them
// itself at no division and no table read on its path (each lane finds the
// slots of four keys of a tile with one division, blocks being whole
// multiples of 16 keys, from a table entry it read a tile earlier, and the
// copies read the slots from shared memory).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/exact_rows_common.cuh"
#include "kernels/cuda/exact_rows_window.cuh"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/cuda/tma_primitives.cuh"

namespace exactly::kernels::cuda::exact_split {
// Each file that includes these (the library's launcher, the lab) has its
// own copies: the lab links the library too.
namespace {

using bf16 = __nv_bfloat16;

constexpr int kTileKeys = 128;  // the prefill kernel's tile (flash_prefill.cu, kSm90BN)
constexpr int kKSteps = kTileKeys / 16;
constexpr int kScoreWarps = 4;                 // a warp scores 32 keys of the tile
constexpr int kChainCols = 16;                 // O's columns per chain warp
constexpr int kChainStages = 4;                // the lone chain's ring: tiles in flight + 1
constexpr int kProducerStages = 8;             // the ring producer warps fill
constexpr int kReservedSharedBytes = 1024;     // the shared memory the runtime keeps per CTA
constexpr int kProbBytes = kKSteps * 32 * 16;  // a tile's P fragments: a 16-byte A fragment per lane and k16 step
constexpr int kChainValueBytes = 32 * 16;      // a tile's corrections and sums: 4 floats per lane
constexpr int kVRow = kChainCols * 2, kVPieces = kVRow / 16, kVBytes = kTileKeys * kVRow;
constexpr int kStageBytes = kProbBytes + kChainValueBytes + kVBytes;
constexpr int kLaneKeys = kTileKeys / 32;  // a chain lane finds the slots of 4 keys of each tile

// The workspace, per group (sequence, KV head, row group) in that order:
// scores [row_cap, key_cap] fp32 (masked keys -inf; key_cap whole tiles),
// per tile each row's largest score [16], P as the chain's mma fragments
// [8 k16 steps, 32 lanes, 4], and each lane's corrections and sums [32, 4].
struct SplitArrays {
  float* scores;
  float* maxes;
  uint32_t* probs;
  float* chain;
  int row_groups, row_cap, key_cap;
};

struct SplitShape {
  int row_groups, row_cap, key_cap;
  SplitShape(int group, int max_query_len, int max_seq_len) {
    const int rows = std::max(1, max_query_len * group);
    row_groups = (rows + 15) / 16;
    row_cap = std::min(16, rows);
    key_cap = (std::max(1, max_seq_len) + kTileKeys - 1) / kTileKeys * kTileKeys;
  }
};

// The workspace's arrays in order, each a multiple of 16 bytes.
struct SplitLayout {
  int64_t scores, maxes, probs, chain;
  SplitLayout(int n_seqs, int n_kv_heads, const SplitShape& shape) {
    const int64_t groups = int64_t{n_seqs} * n_kv_heads * shape.row_groups, tiles = shape.key_cap / kTileKeys;
    scores = groups * shape.row_cap * int64_t{shape.key_cap} * 4;
    maxes = groups * tiles * 16 * 4;
    probs = groups * tiles * kProbBytes;
    chain = groups * tiles * kChainValueBytes;
  }
  int64_t bytes() const { return scores + maxes + probs + chain; }
};

// Where a group's part of each workspace array starts.
struct GroupArrays {
  float* scores;
  float* maxes;
  uint32_t* probs;
  float* chain;
  __device__ GroupArrays(const SplitArrays& a, int n_kv_heads, int s, int kv_head, int group_index) {
    const int64_t group = (int64_t{s} * n_kv_heads + kv_head) * a.row_groups + group_index;
    const int64_t tiles = a.key_cap / kTileKeys;
    scores = a.scores + group * a.row_cap * int64_t{a.key_cap};
    maxes = a.maxes + group * tiles * 16;
    probs = a.probs + group * tiles * (kProbBytes / 4);
    chain = a.chain + group * tiles * (kChainValueBytes / 4);
  }
};

template <int D>
__global__ void __launch_bounds__(kScoreWarps * 32) exact_scores_kernel(const ExactRowsParams p, const SplitArrays a) {
  constexpr int kPieces = D / 8, kRowStep = kScoreWarps * 32 / kPieces;
  static_assert(kScoreWarps * 32 == kTileKeys, "a thread finds the slot of one key of the tile");
  __shared__ __align__(128) uint8_t keys[kTileKeys * D * 2];
  __shared__ int32_t slots[kTileKeys];  // each key's slot in the pool, -1 past the context
  __shared__ float warp_max[kScoreWarps][16];
  const int tile = blockIdx.x, kv_head = blockIdx.y, s = blockIdx.z / a.row_groups;
  const int group_index = blockIdx.z % a.row_groups;
  const RowGroup rg(p, s, group_index);
  const int key0 = tile * kTileKeys;
  if (rg.empty() || key0 >= rg.ctx_len) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, c = lane % 4, q_mat = lane / 8, q_row = lane % 8;
  {
    const int key = key0 + tid;
    const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;
    slots[tid] = key < rg.ctx_len ? table[key / p.block_size] * p.block_size + key % p.block_size : -1;
  }
  __syncthreads();
  const int piece = tid % kPieces;
  const uint32_t base = smem_address(keys);
  const int64_t head_stride = int64_t{p.n_kv_heads} * D;
  const bf16* pool = p.k_cache + int64_t{kv_head} * D + piece * 8;
#pragma unroll
  for (int j = 0; j < kTileKeys / kRowStep; ++j) {
    const int r = tid / kPieces + j * kRowStep;
    const int32_t slot = slots[r];
    cp_async_16(base + swizzled(r, piece, D * 2), pool + int64_t{max(slot, 0)} * head_stride, slot >= 0);
  }
  cp_async_commit();
  uint32_t qf[D / 16][4];
  load_q_fragments<D>(qf, p, rg, kv_head, lane);
  cp_async_wait<0>();
  __syncthreads();
  float acc[4][4] = {};
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
  const GroupArrays w(a, p.n_kv_heads, s, kv_head, group_index);
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
      if (exists) *reinterpret_cast<float2*>(w.scores + int64_t{row} * a.key_cap + key) = v;
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    if (c == 0) warp_max[warp][row] = mx;
  }
  __syncthreads();
  if (tid < 16)
    w.maxes[tile * 16 + tid] =
        fmaxf(fmaxf(warp_max[0][tid], warp_max[1][tid]), fmaxf(warp_max[2][tid], warp_max[3][tid]));
}

__global__ void __launch_bounds__(32) exact_probs_kernel(const ExactRowsParams p, const SplitArrays a) {
  const int tile = blockIdx.x, kv_head = blockIdx.y, s = blockIdx.z / a.row_groups;
  const int group_index = blockIdx.z % a.row_groups;
  const RowGroup rg(p, s, group_index);
  if (rg.empty() || tile * kTileKeys >= rg.ctx_len) return;
  const int lane = threadIdx.x, g = lane / 4, c = lane % 4;
  const int here = min(16, rg.rows - rg.row0);  // rows of the group that exist
  const GroupArrays w(a, p.n_kv_heads, s, kv_head, group_index);
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
    for (int step = 1; step < 32; step *= 2)
      before[r] = fmaxf(before[r], __shfl_xor_sync(0xffffffffu, before[r], step));
  sm.m_run[0] = before[g];
  sm.m_run[1] = before[g + 8];
  float sc[kTileKeys / 2];
#pragma unroll
  for (int i = 0; i < kTileKeys / 2; i += 2) {  // the accumulator layout: pairs of adjacent keys
    const int row = g + 8 * ((i % 4) / 2), key = tile * kTileKeys + (i / 4) * 8 + 2 * c;
    const float2 v = row < here ? *reinterpret_cast<const float2*>(w.scores + int64_t{row} * a.key_cap + key)
                                : float2{-INFINITY, -INFINITY};
    sc[i] = v.x;
    sc[i + 1] = v.y;
  }
  if (here <= 8)  // rows g + 8 do not exist: half the exponentials
    sm.update<1>(sc, p.scale_log2);
  else
    sm.update(sc, p.scale_log2);
  uint32_t pk[kKSteps][4];
  pack_probabilities(sc, pk);
  uint4* probs = reinterpret_cast<uint4*>(w.probs) + int64_t{tile} * kKSteps * 32;
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) probs[ks * 32 + lane] = uint4{pk[ks][0], pk[ks][1], pk[ks][2], pk[ks][3]};
  reinterpret_cast<float4*>(w.chain)[int64_t{tile} * 32 + lane] =
      float4{sm.correction[0], sm.correction[1], sm.l_run[0], sm.l_run[1]};
}

// A chain lane's copies of tile t into a stage: the tile's P fragments, its
// corrections and sums, and the warp's 16 columns of V through the slots.
// COPIES false (the lab's ablation, wrong bits): no copies at all, the chain's floor.
template <int D, int STAGES, bool COPIES = true>
struct ChainCopies {
  const ExactRowsParams& p;
  const GroupArrays& w;
  const int32_t* table;
  const bf16* vpool;
  int32_t (*slots)[kTileKeys];  // [stage][key of the tile]
  uint32_t ring;
  int ctx_len, n_tiles, lane;

  // The copies of the chain CTA of sequence s, its KV head and the 16
  // columns from col0.
  __device__ static ChainCopies of(const ExactRowsParams& p, const GroupArrays& w, int s, int kv_head, int col0,
                                   int32_t (*slots)[kTileKeys], uint32_t ring, int ctx_len, int lane) {
    return {p,
            w,
            p.block_tables + int64_t{s} * p.max_blocks_per_seq,
            p.v_cache + int64_t{kv_head} * D + col0,
            slots,
            ring,
            ctx_len,
            (ctx_len + kTileKeys - 1) / kTileKeys,
            lane};
  }

  // The table entry of this lane's keys of tile t (-1 past the context).
  __device__ int32_t entry(int t) const {
    const int key = t * kTileKeys + kLaneKeys * lane;
    return key < ctx_len ? table[key / p.block_size] : -1;
  }
  // `entry` is the lane's entry of tile t, read a tile earlier.
  __device__ void issue(int t, int32_t entry) const {
    if (COPIES && t < n_tiles) {
      const int stage = t % STAGES;
      const uint32_t dst = ring + stage * kStageBytes;
      const int key = t * kTileKeys + kLaneKeys * lane, offset = key % p.block_size;
#pragma unroll
      for (int k = 0; k < kLaneKeys; ++k)
        slots[stage][kLaneKeys * lane + k] = entry >= 0 && key + k < ctx_len ? entry * p.block_size + offset + k : -1;
      const uint8_t* probs = reinterpret_cast<const uint8_t*>(w.probs) + int64_t{t} * kProbBytes;
#pragma unroll
      for (int i = lane; i < kProbBytes / 16; i += 32) cp_async_16(dst + 16 * i, probs + 16 * i, true);
      cp_async_16(dst + kProbBytes + 16 * lane,
                  reinterpret_cast<const uint8_t*>(w.chain) + int64_t{t} * kChainValueBytes + 16 * lane, true);
      __syncwarp();
      const int64_t head_stride = int64_t{p.n_kv_heads} * D;
#pragma unroll
      for (int i = lane; i < kTileKeys * kVPieces; i += 32) {
        const int key_local = i / kVPieces, piece = i % kVPieces;
        const int32_t slot = slots[stage][key_local];
        cp_async_16(dst + kProbBytes + kChainValueBytes + key_local * kVRow + piece * 16,
                    vpool + int64_t{max(slot, 0)} * head_stride + piece * 8, slot >= 0);
      }
    }
    cp_async_commit();
  }
};

// One tile of O's chain from its stage in the ring: l = l * correction +
// the tile's sum, O *= correction (by row), O += P V in eight k16 steps.
__device__ __forceinline__ void chain_tile(float (&o)[kChainCols / 8][4], float (&l)[2], uint32_t stage,
                                           const uint8_t* stage_ptr, int lane) {
  constexpr int kNT = kChainCols / 8;  // 8-column n-tiles of the warp's O
  const int q_mat = lane / 8, q_row = lane % 8;
  const float4 cv = *reinterpret_cast<const float4*>(stage_ptr + kProbBytes + 16 * lane);
  const float correction[2] = {cv.x, cv.y}, added[2] = {cv.z, cv.w};
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] = l[r] * correction[r] + added[r];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
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
}

template <int D, int STAGES, bool COPIES = true>
__global__ void __launch_bounds__(32) exact_chain_kernel(const ExactRowsParams p, const SplitArrays a) {
  release_dependents();  // the output product may start streaming its weights
  constexpr int kNT = kChainCols / 8;  // 8-column n-tiles of the warp's O
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ int32_t slots[STAGES][kTileKeys];
  const int col0 = blockIdx.x * kChainCols, kv_head = blockIdx.y, s = blockIdx.z / a.row_groups;
  const int group_index = blockIdx.z % a.row_groups;
  const RowGroup rg(p, s, group_index);
  if (rg.empty()) return;
  const int lane = threadIdx.x;
  const GroupArrays w(a, p.n_kv_heads, s, kv_head, group_index);
  const auto copies =
      ChainCopies<D, STAGES, COPIES>::of(p, w, s, kv_head, col0, slots, smem_address(ring), rg.ctx_len, lane);
  // Table entries one tile ahead of the copies: the read of a tile's entry
  // is in flight while the chain runs the tile before.
  int32_t next_entry = copies.entry(0);
  for (int i = 0; i < STAGES - 1; ++i) {
    const int32_t e = next_entry;
    next_entry = copies.entry(i + 1);
    copies.issue(i, e);
  }

  OnlineSoftmax<kTileKeys> sm;  // only l_run is used: the row sums at the end
  float o[kNT][4] = {};
  for (int t = 0; t < copies.n_tiles; ++t) {
    cp_async_wait<STAGES - 2>();
    __syncwarp();
    chain_tile(o, sm.l_run, copies.ring + (t % STAGES) * kStageBytes, ring + (t % STAGES) * kStageBytes, lane);
    __syncwarp();
    const int32_t e = next_entry;
    next_entry = copies.entry(t + STAGES);
    copies.issue(t + STAGES - 1, e);
  }
  cp_async_wait<0>();
  exact_windows::write_rows<D>(p, rg, kv_head, sm, o, col0);
}

// The chain warp beside PRODUCERS producer warps (sm_90; exact_rows_split.cu
// chooses how many). Producer k (warp 1 + k) takes tiles k, k + PRODUCERS,
// ..., finds their slots and issues their copies into a ring of STAGES tiles;
// each lane's copies arrive on the stage's full barrier when they land
// (cp.async.mbarrier.arrive.noinc, 32 arrivals a phase); the chain warp
// (warp 0) waits on it, runs the tile as the one-warp chain does and frees
// the stage on its empty barrier. The chain's arithmetic is the one-warp
// chain's, so the bits are too.
[[maybe_unused]] __device__ __forceinline__ void cp_async_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

template <int D, int STAGES, int PRODUCERS>
__global__ void __launch_bounds__(32 * (1 + PRODUCERS))
    exact_chain_pc_kernel(const ExactRowsParams p, const SplitArrays a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // mbarrier waits by parity: Hopper and later
#else
  static_assert(STAGES % PRODUCERS == 0, "each stage is filled by one producer, in its order");
  release_dependents();  // the output product may start streaming its weights
  constexpr int kNT = kChainCols / 8;
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ int32_t slots[STAGES][kTileKeys];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  const int col0 = blockIdx.x * kChainCols, kv_head = blockIdx.y, s = blockIdx.z / a.row_groups;
  const int group_index = blockIdx.z % a.row_groups;
  const RowGroup rg(p, s, group_index);
  if (rg.empty()) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbarrier_init(smem_address(&full[i]), 32);
      mbarrier_init(smem_address(&empty[i]), 1);
    }
  }
  __syncthreads();
  const GroupArrays w(a, p.n_kv_heads, s, kv_head, group_index);
  const auto copies = ChainCopies<D, STAGES>::of(p, w, s, kv_head, col0, slots, smem_address(ring), rg.ctx_len, lane);
  if (warp >= 1) {  // a producer: tiles warp - 1, warp - 1 + PRODUCERS, ...
    int32_t next_entry = copies.entry(warp - 1);
    for (int t = warp - 1; t < copies.n_tiles; t += PRODUCERS) {
      const int32_t e = next_entry;
      next_entry = copies.entry(t + PRODUCERS);
      if (t >= STAGES) mbarrier_wait(smem_address(&empty[t % STAGES]), ((t / STAGES) - 1) & 1);
      copies.issue(t, e);
      cp_async_arrive_noinc(smem_address(&full[t % STAGES]));
    }
    cp_async_wait<0>();
    return;
  }
  OnlineSoftmax<kTileKeys> sm;
  float o[kNT][4] = {};
  for (int t = 0; t < copies.n_tiles; ++t) {
    mbarrier_wait(smem_address(&full[t % STAGES]), (t / STAGES) & 1);
    chain_tile(o, sm.l_run, copies.ring + (t % STAGES) * kStageBytes, ring + (t % STAGES) * kStageBytes, lane);
    __syncwarp();
    if (lane == 0) mbarrier_arrive(smem_address(&empty[t % STAGES]));
  }
  exact_windows::write_rows<D>(p, rg, kv_head, sm, o, col0);
#endif
}

template <int D, int STAGES, int PRODUCERS, bool COPIES = true>
void launch(const ExactRowsParams& p, const SplitArrays& a, int n_seqs, int max_seq_len, cudaStream_t stream) {
  const unsigned z = static_cast<unsigned>(n_seqs * a.row_groups), heads = static_cast<unsigned>(p.n_kv_heads);
  const unsigned tiles = static_cast<unsigned>((max_seq_len + kTileKeys - 1) / kTileKeys);
  exact_scores_kernel<D><<<dim3(tiles, heads, z), kScoreWarps * 32, 0, stream>>>(p, a);
  check_launch("exact_rows_attention: scores");
  exact_probs_kernel<<<dim3(tiles, heads, z), 32, 0, stream>>>(p, a);
  check_launch("exact_rows_attention: probabilities");
  static_assert(COPIES || PRODUCERS == 0, "the copy-free ablation is the lone chain's");
  if constexpr (PRODUCERS > 0) {
    allow_shared_memory<exact_chain_pc_kernel<D, STAGES, PRODUCERS>>(STAGES * kStageBytes,
                                                                     "exact_rows_attention: chain");
    exact_chain_pc_kernel<D, STAGES, PRODUCERS>
        <<<dim3(D / kChainCols, heads, z), 32 * (1 + PRODUCERS), STAGES * kStageBytes, stream>>>(p, a);
  } else {
    allow_shared_memory<exact_chain_kernel<D, STAGES, COPIES>>(STAGES * kStageBytes, "exact_rows_attention: chain");
    exact_chain_kernel<D, STAGES, COPIES><<<dim3(D / kChainCols, heads, z), 32, STAGES * kStageBytes, stream>>>(p, a);
  }
  check_launch("exact_rows_attention: chain");
}

// The workspace's arrays for a batch of this shape.
inline SplitArrays split_arrays(void* workspace, const SplitLayout& layout, const SplitShape& shape) {
  auto* bytes = static_cast<uint8_t*>(workspace);
  return {reinterpret_cast<float*>(bytes),
          reinterpret_cast<float*>(bytes + layout.scores),
          reinterpret_cast<uint32_t*>(bytes + layout.scores + layout.maxes),
          reinterpret_cast<float*>(bytes + layout.scores + layout.maxes + layout.probs),
          shape.row_groups,
          shape.row_cap,
          shape.key_cap};
}

}  // namespace
}  // namespace exactly::kernels::cuda::exact_split
