// The pieces of exact_rows_attention's windowed paths (exact_rows_window.cu,
// exact_rows_cluster.cu): the shared-memory layout of a CTA that takes the
// keys 256 at a time, its copies of K and V through the block table, the
// window's scores, a tile's probabilities from the running maximum before it,
// and the chain that adds a window's tiles to O.
#pragma once

#include <cuda_bf16.h>

#include <cmath>

#include "kernels/cuda/exact_rows_common.cuh"
#include "kernels/cuda/online_softmax.cuh"

namespace exactly::kernels::cuda::exact_windows {

using bf16 = __nv_bfloat16;

constexpr int kBN = 128;  // the prefill kernel's tile (flash_prefill.cu, kSm90BN)
constexpr int kWindowTiles = 2, kWindowKeys = kWindowTiles * kBN, kWarps = 8, kThreads = kWarps * 32;
constexpr int kKeysPerWarp = kWindowKeys / kWarps;  // a warp's keys of the window's scores: 4 n-tiles
constexpr int kScoreStride = kWindowKeys + 4;       // a row of stored scores (padded against bank conflicts)
constexpr int kFragmentBytes = 8 * 32 * 16;         // a tile's P: a 16-byte A fragment per lane and k16 step
constexpr int kChainCols = 16;                      // O's columns per chain warp
static_assert(kThreads == kWindowKeys, "a thread finds the slot of one key of a window");

template <int D>
struct WindowLayout {
  static constexpr int kKeysBytes = kWindowKeys * D * 2;  // two of K, then V: rows of D, 16-byte pieces swizzled
  static constexpr int kK = 0, kV = 2 * kKeysBytes, kScores = 3 * kKeysBytes;
  static constexpr int kProbs = kScores + 16 * kScoreStride * 4;
  static constexpr int kChain = kProbs + kWindowTiles * kFragmentBytes;  // per tile and lane: corrections, sums
  static constexpr int kMax = kChain + kWindowTiles * 32 * 16;           // per warp and row: largest score
  static constexpr int kSlots = kMax + kWarps * 16 * 4;                  // two windows' slots by key (-1: none)
  static constexpr int kBytes = kSlots + 2 * kWindowKeys * 4;
};

// A CTA's copies of K and V through the block table, for its windows
// first, first + stride, ...: window j of the CTA uses buffers j % 2. Keys
// past the context are zeros, so that P V multiplies them by 0.
template <int D>
struct WindowCopies {
  using L = WindowLayout<D>;
  static constexpr int kPieces = D / 8, kRowStep = kThreads / kPieces;
  const ExactRowsParams& p;
  const int32_t* table;
  int32_t* slots;
  uint32_t base;
  int ctx_len, n_windows, kv_head, tid, first, stride;

  __device__ int window(int j) const { return first + j * stride; }
  // This thread's key of the CTA's window j: its block's entry, -1 past the context.
  __device__ int32_t block_entry(int j) const {
    const int key = window(j) * kWindowKeys + tid;
    return key < ctx_len ? table[key / p.block_size] : -1;
  }
  // Into the slots of j % 2, which no copy in flight reads any more.
  __device__ void store_slot(int j, int32_t entry) const {
    const int key = window(j) * kWindowKeys + tid;
    slots[(j % 2) * kWindowKeys + tid] = entry < 0 ? -1 : entry * p.block_size + key % p.block_size;
  }
  __device__ uint32_t keys(int j) const { return base + L::kK + (j % 2) * L::kKeysBytes; }
  // One cp.async group: window j's K (into its buffer) or V.
  __device__ void issue(int j, bool values) const {
    if (window(j) < n_windows) {
      const int piece = tid % kPieces, row0 = tid / kPieces;
      const __nv_bfloat16* pool = (values ? p.v_cache : p.k_cache) + int64_t{kv_head} * D + piece * 8;
      const int64_t head_stride = int64_t{p.n_kv_heads} * D;
      const uint32_t dst = values ? base + L::kV : keys(j);
      const int32_t* window_slots = slots + (j % 2) * kWindowKeys;
#pragma unroll
      for (int i = 0; i < kWindowKeys / kRowStep; ++i) {
        const int r = row0 + i * kRowStep;
        const int32_t slot = window_slots[r];
        cp_async_16(dst + swizzled(r, piece, D * 2), pool + int64_t{max(slot, 0)} * head_stride, slot >= 0);
      }
    }
    cp_async_commit();
  }
};

// Keys key0 + 32 warp .. + 31 of the window: masked scores into `scores`
// (row by key) and each row's largest into row_max[warp].
template <int D>
__device__ __forceinline__ void score_window(const uint32_t (&qf)[D / 16][4], uint32_t keys, int key0, int ctx_len,
                                             const int (&pos)[2], float* scores, float* row_max) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  float acc[4][4] = {};
#pragma unroll
  for (int ks = 0; ks < D / 16; ks += 2) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // n-tile j of the warp's keys, one k16 chain over D each
      uint32_t b[4];
      ldmatrix_x4(b, keys + swizzled(kKeysPerWarp * warp + 8 * j + lane % 8, 2 * ks + lane / 8, D * 2));
      Elem<bf16>::mma(acc[j], qf[ks], b[0], b[1]);
      Elem<bf16>::mma(acc[j], qf[ks + 1], b[2], b[3]);
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int local = kKeysPerWarp * warp + 8 * j + 2 * c, key = key0 + local;
      float2 v{acc[j][2 * r], acc[j][2 * r + 1]};
      if (key >= ctx_len || key > pos[r]) v.x = -INFINITY;
      if (key + 1 >= ctx_len || key + 1 > pos[r]) v.y = -INFINITY;
      mx = fmaxf(mx, fmaxf(v.x, v.y));
      *reinterpret_cast<float2*>(scores + (g + 8 * r) * kScoreStride + local) = v;
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    if (c == 0) row_max[warp * 16 + g + 8 * r] = mx;
  }
}

// Tile t of the window (run by warp t): its probabilities from the running
// maximum before it (`before` over the earlier windows, row_max over the
// window's earlier tiles), stored as P V's A fragments with each lane's
// corrections and sums.
__device__ __forceinline__ void tile_probabilities(int t, const float (&before)[2], const float* scores,
                                                   const float* row_max, int here, float scale_log2,
                                                   uint4* fragments, float4* chain) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  OnlineSoftmax<kBN> sm;  // no sum yet: what the tile adds is what is stored
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float m = before[r];
    for (int w = 0; w < t * (kBN / kKeysPerWarp); ++w) m = fmaxf(m, row_max[w * 16 + g + 8 * r]);
    sm.m_run[r] = m;
  }
  float sc[kBN / 2];
#pragma unroll
  for (int i = 0; i < kBN / 2; i += 2) {  // the accumulator layout: pairs of adjacent keys
    const int row = g + 8 * ((i % 4) / 2), local = t * kBN + (i / 4) * 8 + 2 * c;
    const float2 v = row < here ? *reinterpret_cast<const float2*>(scores + row * kScoreStride + local)
                                : float2{-INFINITY, -INFINITY};
    sc[i] = v.x;
    sc[i + 1] = v.y;
  }
  if (here <= 8)  // rows g + 8 do not exist: half the exponentials
    sm.update<1>(sc, scale_log2);
  else
    sm.update(sc, scale_log2);
  uint32_t pk[8][4];
  pack_probabilities(sc, pk);
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) fragments[ks * 32 + lane] = uint4{pk[ks][0], pk[ks][1], pk[ks][2], pk[ks][3]};
  chain[lane] = float4{sm.correction[0], sm.correction[1], sm.l_run[0], sm.l_run[1]};
}

// The chain over the window's tiles for this warp's 16 columns of O.
template <int D>
__device__ __forceinline__ void chain_window(int tiles, const uint8_t* shared, uint32_t values, OnlineSoftmax<kBN>& sm,
                                             float (&o)[2][4]) {
  using L = WindowLayout<D>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q_mat = lane / 8;
  for (int t = 0; t < tiles; ++t) {
    const float4 cv = reinterpret_cast<const float4*>(shared + L::kChain)[t * 32 + lane];
    const float correction[2] = {cv.x, cv.y}, added[2] = {cv.z, cv.w};
#pragma unroll
    for (int r = 0; r < 2; ++r) sm.l_run[r] = sm.l_run[r] * correction[r] + added[r];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[nt][e] *= correction[e / 2];
    const uint4* fragments = reinterpret_cast<const uint4*>(shared + L::kProbs + t * kFragmentBytes);
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const uint4 f = fragments[ks * 32 + lane];
      const uint32_t pk[4] = {f.x, f.y, f.z, f.w};
      uint32_t b[4];
      ldmatrix_x4_trans(b, values + swizzled(t * kBN + 16 * ks + (q_mat % 2) * 8 + lane % 8,
                                             (kChainCols / 8) * warp + q_mat / 2, D * 2));
      Elem<bf16>::mma(o[0], pk, b[0], b[1]);
      Elem<bf16>::mma(o[1], pk, b[2], b[3]);
    }
  }
}

// A chain warp's 16 columns of O / l, columns col0 .. col0 + 15 of the
// group's rows of `out`.
template <int D>
__device__ __forceinline__ void write_rows(const ExactRowsParams& p, const RowGroup& rg, int kv_head,
                                           const OnlineSoftmax<kBN>& sm, const float (&o)[2][4], int col0) {
  const int lane = threadIdx.x % 32;
  const float inv[2] = {sm.inverse_sum(0), sm.inverse_sum(1)};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    __nv_bfloat16* dst = rg.row(p.out, p, kv_head, lane / 4 + 8 * r, D);
    if (dst == nullptr) continue;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
      *reinterpret_cast<uint32_t*>(dst + col0 + 8 * nt + 2 * (lane % 4)) =
          Elem<__nv_bfloat16>::pack(o[nt][2 * r] * inv[r], o[nt][2 * r + 1] * inv[r]);
  }
}

}  // namespace exactly::kernels::cuda::exact_windows
