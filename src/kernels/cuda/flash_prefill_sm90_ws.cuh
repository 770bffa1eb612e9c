// Hopper FlashAttention prefill with warp specialisation in the manner of
// FlashAttention-3, composed of roles (sm90_prefill/):
// - the producer warpgroup (producer.cuh; registers given back with
//   setmaxnreg) copies K/V tiles into a ring of shared-memory stages with the
//   tensor memory accelerator, one bulk copy per 16-key block-table entry and
//   64-column panel, and each item's Q ahead of them (F::kQByTma);
// - two consumer warpgroups of 64 query rows (three at head dim 64;
//   consumer.cuh) run the wgmma products and the online softmax, releasing
//   each stage when done with it, and run on from one item into the next;
// - the epilogue (epilogue.cuh) stores each item's output, after merging the
//   pieces of a split item;
// - the tile scheduler (tile_scheduler.cuh) hands each CTA its items.
// Their options are named in features.cuh, and the kernel lab reaches in
// through a hook type (hook.cuh). bf16, head dim 64 or 128 (one or two
// 64-column panels per K/V row).
//
// Persistent: one CTA per SM takes work items (a sequence, a head, a block of
// 64 query rows per consumer warpgroup) from a global counter until none are
// left, heaviest block of each head first, the blocks of one head together
// (their K/V stay in L2), as the hardware hands out the blocks of a plain grid.
// So that a launch does not end with a few CTAs busy and the rest idle, the
// last heads' items go longest first across them under a causal mask
// (sm90_ws_tail_heads), and without one the items of the last round run in
// pieces over their keys that the last to finish merges (sm90_ws_split). The
// producer's first warp describes each item once (where its rows are, how many
// keys it sees) in a shared-memory slot and runs on into the next item's K/V
// while the consumers finish the current one.
//
// In clusters of two (FlashAttention-3's ClusterM = 2), an item is two
// adjacent query blocks of one head, one per CTA, and each K/V tile is copied
// once into both CTAs (TMA multicast, each CTA's producer issuing half of
// it): half the L2 traffic and half the copies per CTA. The cluster's first
// CTA schedules for both. Under a causal mask the two blocks see different
// numbers of keys; the CTA with fewer waits out the other's extra tile
// without computing it, and the longer block alternates between the CTAs, so
// neither falls behind by more than a tile.
//
// Keys past the sequence's length inside its last block are read as they are
// in the pool and masked; the pool must hold finite values there (the engine
// zeroes it at allocation and only ever writes finite K/V).
#pragma once

#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/prefill_schedule.h"
#include "kernels/cuda/sm90_prefill/consumer.cuh"
#include "kernels/cuda/sm90_prefill/epilogue.cuh"
#include "kernels/cuda/sm90_prefill/features.cuh"
#include "kernels/cuda/sm90_prefill/hook.cuh"
#include "kernels/cuda/sm90_prefill/producer.cuh"
#include "kernels/cuda/sm90_prefill/stages.cuh"
#include "kernels/cuda/sm90_prefill/tile_scheduler.cuh"
#include "kernels/cuda/tma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"

namespace exactly::kernels::cuda {

// k_map, v_map: the KV pools, q_map: the queries (read only with
// F::kQByTma); see Sm90WsProducer. sched: the items (prefill_schedule.h).
template <class F, class Hook = Sm90WsNoHook>
__global__ void __launch_bounds__(128 * (F::kConsumerWarpgroups + 1), 1)
    flash_prefill_sm90_ws_kernel(const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map,
                                 const __grid_constant__ CUtensorMap q_map, const PrefillParams p,
                                 const Sm90WsSchedule sched) {
#if defined(EXACTLY_HAS_WGMMA)
  constexpr int CLUSTER = F::kCluster, WG = F::kConsumerWarpgroups;
  extern __shared__ unsigned char smem_raw[];
  const Sm90WsStages<F> st((smem_address(smem_raw) + 1023u) & ~1023u);
  const int tid = threadIdx.x;

  if (tid == 0) st.init_barriers();
  // In a cluster, no CTA may arrive on or copy into another's barriers before
  // they exist, nor leave while another may still do so.
  if constexpr (CLUSTER > 1) {
    cluster_sync_all();
  } else {
    __syncthreads();
  }

  // Registers: 40 for the producer and 232 for each consumer thread with two
  // consumer warpgroups; with three, FlashAttention-3's 32 and 160 (the
  // whole 64K register file either way).
  if (tid < 128) {  // producer warpgroup
    setmaxnreg_dec<WG == 2 ? 40 : 32>();
    Sm90WsProducer<F, Hook>(st, &k_map, &v_map, &q_map, p).run(sched, tid);
    if constexpr (CLUSTER > 1) cluster_sync_all();
    return;
  }

  // Consumer warpgroups: each item's steps, then its last step, under which
  // the next item starts; then the item's output stored and its slot freed.
  setmaxnreg_inc<WG == 2 ? 232 : 160>();
  const int ctid = tid - 128;
  float row_max[2], row_sum[2];  // the rows' raw maxima and sums, of the item whose output is stored
  typename Sm90WsConsumer<F, Hook>::State state;
  typename Hook::Record rec;
  Sm90WsItemTiles tiles;
  const Sm90WsTileScheduler<F> items(st, sched, p);
  Sm90WsConsumer<F, Hook> consumer(st, p, items, state, rec, ctid);
  const Sm90WsEpilogue<F, Hook> epilogue(p, sched, ctid);
  const Sm90WsDesc first = items.wait(0);
  if (items.valid(first)) {
    consumer.first_item(tiles, first);
    for (;;) {
      consumer.item_steps(tiles);
      bool one_tile;  // the next item has one tile
      const bool next = consumer.last_step(tiles, row_max, row_sum, one_tile);
      const int done = next ? state.k - 1 : state.k;  // the item whose output is stored
      const Sm90WsDesc w = items.at(done);
      if (w.piece < 0 || epilogue.merge_pieces(w, state.o, row_max, row_sum)) {
        const float inv[2] = {row_sum[0] > 0.f ? 1.f / row_sum[0] : 0.f, row_sum[1] > 0.f ? 1.f / row_sum[1] : 0.f};
        epilogue.store(w, state.o, inv);
      }
      items.free(done);
      if (!next) break;
      consumer.next_item(tiles, one_tile);
    }
  }
  consumer.end();
  if constexpr (CLUSTER > 1) cluster_sync_all();
#endif
}

// Host: the configuration of a launch of `grid` CTAs in clusters of
// `cluster` along x (it points into itself: not copyable).
struct Sm90WsClusterLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attribute{};
  Sm90WsClusterLaunch(int grid, int cluster, int smem_bytes, cudaStream_t stream) {
    config.gridDim = dim3(grid);
    config.blockDim = dim3(384);
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = cluster;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  Sm90WsClusterLaunch(const Sm90WsClusterLaunch&) = delete;
  Sm90WsClusterLaunch& operator=(const Sm90WsClusterLaunch&) = delete;
};

template <typename... Params, typename... Args>
inline cudaError_t sm90_ws_launch(void (*kernel)(Params...), int grid, int cluster, int smem_bytes, cudaStream_t stream,
                                  Args... args) {
  Sm90WsClusterLaunch launch(grid, cluster, smem_bytes, stream);
  return cudaLaunchKernelEx(&launch.config, kernel, args...);
}

// Host: how many clusters of `cluster` CTAs of the kernel fit on the GPU at once.
template <typename... Params>
inline int sm90_ws_max_clusters(void (*kernel)(Params...), int cluster, int smem_bytes) {
  Sm90WsClusterLaunch launch(cluster, cluster, smem_bytes, nullptr);
  int n = 0;
  return cudaOccupancyMaxActiveClusters(&n, kernel, &launch.config) == cudaSuccess ? n : 0;
}

}  // namespace exactly::kernels::cuda
