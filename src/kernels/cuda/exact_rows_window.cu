// exact_rows_attention's windowed path: the prefill kernel's bits for a
// row group of up to 16 packed rows, with the keys walked two tiles at a time.
//
// In the prefill kernel's chain over 128-key tiles only O and the row sums
// carry from one tile to the next; a tile's probabilities need only its
// scores and the running maximum before it, the largest score of the earlier
// tiles (fmax is exact, so any order gives it). So a CTA of eight warps takes
// the keys in windows of two tiles:
// - scores: warp w computes keys 32 w .. 32 w + 31 of the window from K in
//   shared memory (the prefill kernel's k16 chains over D), masks them, and
//   stores them in fp32 with each row's largest over its keys;
// - probabilities: warp t runs online_softmax.cuh's update on tile t's
//   scores from the running maximum before the tile and no sum, and stores P
//   as the P V product's mma fragments, with the tile's corrections of O and
//   l and the sum it adds to l;
// - the chain: warp w owns 16 of O's columns and walks the window's tiles in
//   order: l = l * correction + the tile's sum, O *= correction, O += P V in
//   eight k16 steps.
// K is double-buffered and streams two windows ahead, V one window ahead.
// Each key's slot in the pool is found once per window (a thread per key) and
// kept in shared memory, so that a copy costs a shared load and a multiply:
// with a division and a block-table read per copy, issuing the copies took
// most of a CTA's time (dev/cuda/NOTES.md).
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/exact_rows_window.h"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/online_softmax.cuh"

namespace exactly::kernels::cuda {
namespace {

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

// A CTA's copies of K and V through the block table. Keys past the context
// are zeros, so that P V multiplies them by 0.
template <int D>
struct WindowCopies {
  using L = WindowLayout<D>;
  static constexpr int kPieces = D / 8, kRowStep = kThreads / kPieces;
  const ExactRowsParams& p;
  const int32_t* table;
  int32_t* slots;
  uint32_t base;
  int ctx_len, n_windows, kv_head, tid;

  // This thread's key of `window`: its block's entry, -1 past the context.
  __device__ int32_t block_entry(int window) const {
    const int key = window * kWindowKeys + tid;
    return key < ctx_len ? table[key / p.block_size] : -1;
  }
  // Into the slots of window % 2, which no copy in flight reads any more.
  __device__ void store_slot(int window, int32_t entry) const {
    const int key = window * kWindowKeys + tid;
    slots[(window % 2) * kWindowKeys + tid] = entry < 0 ? -1 : entry * p.block_size + key % p.block_size;
  }
  __device__ uint32_t keys(int window) const { return base + L::kK + (window % 2) * L::kKeysBytes; }
  // One cp.async group: the window's K (into its buffer) or V.
  __device__ void issue(int window, bool values) const {
    if (window < n_windows) {
      const int piece = tid % kPieces, row0 = tid / kPieces;
      const bf16* pool = (values ? p.v : p.k) + int64_t{kv_head} * D + piece * 8;
      const int64_t head_stride = int64_t{p.n_kv_heads} * D;
      const uint32_t dst = values ? base + L::kV : keys(window);
      const int32_t* window_slots = slots + (window % 2) * kWindowKeys;
#pragma unroll
      for (int j = 0; j < kWindowKeys / kRowStep; ++j) {
        const int r = row0 + j * kRowStep;
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

template <int D>
__global__ void __launch_bounds__(kThreads, 1) exact_window_kernel(const ExactRowsParams p) {
  using L = WindowLayout<D>;
  extern __shared__ __align__(128) uint8_t shared[];
  const int s = blockIdx.x, kv_head = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const RowGroup rg(p, s, blockIdx.z);
  if (rg.empty()) return;
  const int ctx_len = rg.ctx_len, here = min(16, rg.rows - rg.row0);
  float* scores = reinterpret_cast<float*>(shared + L::kScores);
  float* row_max = reinterpret_cast<float*>(shared + L::kMax);
  const WindowCopies<D> copies{p,       p.block_tables + int64_t{s} * p.max_blocks_per_seq,
                               reinterpret_cast<int32_t*>(shared + L::kSlots),
                               smem_address(shared),
                               ctx_len, (ctx_len + kWindowKeys - 1) / kWindowKeys, kv_head, static_cast<int>(threadIdx.x)};
  // cp.async groups in order: K0, K1, V0, none, then per window K(w + 2)
  // after its scores and V(w + 1) after its chain; so K(w) is complete when
  // at most three are pending, V(w) when one is.
  copies.store_slot(0, copies.block_entry(0));
  copies.store_slot(1, copies.block_entry(1));
  __syncthreads();
  copies.issue(0, false);
  copies.issue(1, false);
  copies.issue(0, true);
  cp_async_commit();
  uint32_t qf[D / 16][4];
  load_q_fragments<D>(qf, p, rg, kv_head, lane);
  const int pos[2] = {rg.position(p, lane / 4), rg.position(p, lane / 4 + 8)};

  float before[2] = {-INFINITY, -INFINITY};  // each of the thread's rows' largest score before the window
  OnlineSoftmax<kBN> sm;                     // the chain's row sums
  float o[2][4] = {};                        // a chain warp's two 8-column n-tiles of O
  for (int window = 0; window < copies.n_windows; ++window) {
    const int key0 = window * kWindowKeys;
    const int32_t next_entry = copies.block_entry(window + 2);  // read now, stored after the scores
    cp_async_wait<3>();
    __syncthreads();
    score_window<D>(qf, copies.keys(window), key0, ctx_len, pos, scores, row_max);
    copies.store_slot(window + 2, next_entry);
    __syncthreads();  // K(w) is read: K(w + 2) may come
    copies.issue(window + 2, false);
    const int tiles = min(kWindowTiles, (ctx_len - key0 + kBN - 1) / kBN);
    if (warp < tiles)
      tile_probabilities(warp, before, scores, row_max, here, p.scale_log2,
                         reinterpret_cast<uint4*>(shared + L::kProbs + warp * kFragmentBytes),
                         reinterpret_cast<float4*>(shared + L::kChain) + warp * 32);
#pragma unroll
    for (int r = 0; r < 2; ++r)
      for (int w = 0; w < kWarps; ++w) before[r] = fmaxf(before[r], row_max[w * 16 + lane / 4 + 8 * r]);
    cp_async_wait<1>();  // V(w); K(w + 2) may still be on its way
    __syncthreads();
    if (warp < D / kChainCols) chain_window<D>(tiles, shared, smem_address(shared) + L::kV, sm, o);
    __syncthreads();  // V, the probabilities and the largest scores are read
    copies.issue(window + 1, true);
  }
  cp_async_wait<0>();
  if (warp >= D / kChainCols) return;
  const float inv[2] = {sm.inverse_sum(0), sm.inverse_sum(1)};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    bf16* dst = rg.row(p.out, p, kv_head, lane / 4 + 8 * r, D);
    if (dst == nullptr) continue;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
      *reinterpret_cast<uint32_t*>(dst + kChainCols * warp + 8 * nt + 2 * (lane % 4)) =
          Elem<bf16>::pack(o[nt][2 * r] * inv[r], o[nt][2 * r + 1] * inv[r]);
  }
}

template <int D>
void launch(const ExactRowsParams& p, int n_seqs, int row_groups, cudaStream_t stream) {
  constexpr int kBytes = WindowLayout<D>::kBytes;
  allow_shared_memory<exact_window_kernel<D>>(kBytes, "exact_rows_attention: windows");
  const dim3 grid(static_cast<unsigned>(n_seqs), static_cast<unsigned>(p.n_kv_heads),
                  static_cast<unsigned>(row_groups));
  exact_window_kernel<D><<<grid, kThreads, kBytes, stream>>>(p);
  check_launch("exact_rows_attention: windows");
}

}  // namespace

void exact_rows_windows(const ExactRowsParams& p, int n_seqs, int row_groups, int head_dim, cudaStream_t stream) {
  with_head_dim(head_dim, [&](auto d) { launch<decltype(d)::value>(p, n_seqs, row_groups, stream); });
}

}  // namespace exactly::kernels::cuda
