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
#include "kernels/cuda/exact_rows_window.cuh"
#include "kernels/cuda/exact_rows_window.h"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/online_softmax.cuh"

namespace exactly::kernels::cuda {
namespace {

using namespace exact_windows;

template <int D>
__global__ void __launch_bounds__(kThreads, 1) exact_window_kernel(const ExactRowsParams p) {
  release_dependents();  // the output product may start streaming its weights
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
                               ctx_len, (ctx_len + kWindowKeys - 1) / kWindowKeys, kv_head, static_cast<int>(threadIdx.x),
                               0,       1};
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
  if (warp < D / kChainCols) write_rows<D>(p, rg, kv_head, sm, o, kChainCols * warp);
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
