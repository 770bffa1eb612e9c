// dQ on tensor cores: a CTA per (sequence, query head, 64-query tile), each of
// its four warps owning 16 query rows, walking the key tiles in increasing
// order up to the last key its rows see and recomputing per key tile
//   S = Q K^T, P = exp(S * scale - lse), dP = dO V^T, dS = P (dP - D),
//   dQ += dS K
// with dQ in fp32 registers, scaled and written once at the end. Q and dO
// stay in shared memory; K and V tiles are double-buffered by cp.async.
#include <cmath>

#include "kernels/cuda/flash_train.h"
#include "kernels/cuda/flash_train_launch.h"
#include "kernels/cuda/flash_train_tiles.cuh"

namespace exactly::kernels::cuda::flash_train {
namespace {

// LSE (in the exp2 domain) and D of the thread's two query rows.
struct RowStats {
  float lse_log2[2];
  float delta[2];
};

// A row past the sequence, or one that sees no key (LSE -inf), gets LSE +inf,
// so that its probabilities are 2^(finite - inf) = 0 without a test per key.
__device__ __forceinline__ RowStats row_stats(const BackwardParams& p, const SeqSpan& s, int head, int row0) {
  const int lane = threadIdx.x % 32;
  RowStats stats;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + lane / 4 + 8 * r;
    const int64_t at = (s.q0 + row) * p.n_heads + head;
    const float lse = row < s.lq ? p.lse[at] : -INFINITY;
    stats.lse_log2[r] = lse == -INFINITY ? INFINITY : lse * kLog2e;
    stats.delta[r] = row < s.lq && s.q0 + row < p.delta_rows ? p.delta[at] : 0.f;
  }
  return stats;
}

// S into dS in place of dP: P = 2^(S * scale_log2 - lse_log2) for the keys a
// row sees (0 elsewhere; only tiles on an edge test each key), dS = P (dP - D).
__device__ __forceinline__ void query_rows_ds(const float (&s)[kTile / 8][4], float (&dp)[kTile / 8][4],
                                              float scale_log2, const RowStats& stats, int key0,
                                              const int (&visible)[2], bool edge) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e / 2, key = key0 + nt * 8 + 2 * (lane % 4) + (e & 1);
      const float prob = edge && key >= visible[r] ? 0.f : exp2_approx(fmaf(s[nt][e], scale_log2, -stats.lse_log2[r]));
      dp[nt][e] = prob * (dp[nt][e] - stats.delta[r]);
    }
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) query_tile_kernel(const BackwardParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const SeqSpan s = seq_span(p, blockIdx.z);
  const QueryTile tile = query_tile(s, p.causal);
  const int m0 = tile.m0, n_tiles = tile.n_key_tiles;
  if (m0 >= s.lq) return;
  const int head = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kBytes = kTileBytes<kTile, D>;
  const uint32_t q_tile = smem_address(smem), do_tile = q_tile + kBytes;
  const uint32_t k_tiles = do_tile + kBytes, v_tiles = k_tiles + 2 * kBytes;

  const int64_t q_stride = int64_t{p.n_heads} * D, kv_stride = int64_t{p.n_kv_heads} * D;
  const int64_t q_offset = s.q0 * q_stride + head * D;
  const int64_t kv_offset = s.k0 * kv_stride + (head / p.group) * D;
  auto copy_keys = [&](int tile) {
    const int stage = tile & 1;
    copy_tile<kTile, D>(k_tiles + stage * kBytes, static_cast<const T*>(p.k) + kv_offset, kv_stride, tile * kTile,
                        s.lk);
    copy_tile<kTile, D>(v_tiles + stage * kBytes, static_cast<const T*>(p.v) + kv_offset, kv_stride, tile * kTile,
                        s.lk);
  };
  if (n_tiles > 0) {
    copy_tile<kTile, D>(q_tile, static_cast<const T*>(p.q) + q_offset, q_stride, m0, s.lq);
    copy_tile<kTile, D>(do_tile, static_cast<const T*>(p.d_out) + q_offset, q_stride, m0, s.lq);
    copy_keys(0);
  }
  cp_async_commit();

  const int row0 = m0 + warp * 16;  // the warp's first row; the thread's are row0 + lane / 4 + 8 r
  const RowStats stats = row_stats(p, s, head, row0);
  const int visible[2] = {s.visible(p.causal, row0 + lane / 4), s.visible(p.causal, row0 + lane / 4 + 8)};
  const int warp_visible = s.visible(p.causal, row0);  // the fewest keys any of the warp's rows sees
  float dq[D / 8][4];
  zero(dq);
  walk_double_buffered(n_tiles, copy_keys, [&](int t) {
    float sc[kTile / 8][4], dp[kTile / 8][4];
    zero(sc), zero(dp);
    rows_times_rows<T, D, kTile>(sc, q_tile, warp * 16, k_tiles + (t & 1) * kBytes);
    rows_times_rows<T, D, kTile>(dp, do_tile, warp * 16, v_tiles + (t & 1) * kBytes);
    query_rows_ds(sc, dp, p.scale_log2, stats, t * kTile, visible, t * kTile + kTile > warp_visible);
    weights_times_rows<T, D, kTile>(dq, dp, k_tiles + (t & 1) * kBytes);
  });
  const float factor[2] = {p.scale, p.scale};
  store_rows<T, D>(dq, static_cast<T*>(p.dq) + q_offset, q_stride, row0, s.lq, factor);
}

template <typename T, int D>
void launch(const BackwardParams& p, const FlashTrainShape& s, cudaStream_t stream) {
  constexpr int kSmemBytes = 6 * kTileBytes<kTile, D>;  // Q, dO, and two stages of K and V
  constexpr auto kernel = query_tile_kernel<T, D>;
  allow_shared_memory<kernel>(kSmemBytes, "flash_train_backward (dQ): shared memory limit");
  const dim3 grid(ceil_div(s.max_q_len, kTile), s.n_heads, s.n_seqs);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(p);
  check_launch("flash_train_backward (dQ)");
}

}  // namespace

void launch_query_tile_gradients(const BackwardParams& p, const FlashTrainShape& s, cudaStream_t stream) {
  with_element_type(s.dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    with_head_dim(s.head_dim, [&](auto d) { launch<T, decltype(d)::value>(p, s, stream); });
  });
}

}  // namespace exactly::kernels::cuda::flash_train
