// Where a CTA of the Hopper prefill kernel keeps its tiles and barriers in
// shared memory: the ring of K/V stages that the producer fills and the
// consumers release, the item's Q (when the producer copies it in), and the
// two slots through which the tile scheduler hands out items.
#pragma once

#include <cstdint>

#include "kernels/cuda/sm90_prefill/features.cuh"
#include "kernels/cuda/tma_primitives.cuh"

namespace exactly::kernels::cuda {

// K and V of a stage complete on barriers of their own, so a tile's scores
// can start once its K has landed, while its V is still on the way. In a
// cluster every stage is filled in all of its CTAs at once (multicast), so a
// stage is empty only once the consumers of every CTA have released it:
// each consumer warp arrives on the empty barrier of each CTA. Tile indices
// count on across a CTA's work items, so stages and phases carry over.
template <class F>
struct Sm90WsStages {
  using S = Sm90WsShape<F>;
  static constexpr int STAGES = F::kStages, CLUSTER = F::kCluster;
  uint32_t k, v, q, k_full, v_full, empty, item_full, item_empty, q_full, q_empty, v_empty, items;
  __device__ explicit Sm90WsStages(uint32_t base)
      : k(base), v(base + STAGES * S::kTileBytes), q(base + 2 * STAGES * S::kTileBytes),
        k_full(q + S::kQBytes + 2 * 64), v_full(k_full + STAGES * 8), empty(k_full + 2 * STAGES * 8),
        item_full(empty + STAGES * 8), item_empty(item_full + 2 * 8), q_full(item_empty + 2 * 8), q_empty(q_full + 8),
        v_empty(q_empty + 8), items(q + S::kQBytes) {}
  __device__ uint32_t item_slot(int k) const { return items + 64 * (k & 1); }
  __device__ uint32_t k_tile(int t) const { return k + (t % STAGES) * S::kTileBytes; }
  __device__ uint32_t v_tile(int t) const { return v + (t % STAGES) * S::kTileBytes; }
  __device__ void wait_k(int t) const { mbarrier_wait(k_full + 8 * (t % STAGES), (t / STAGES) & 1); }
  __device__ void wait_v(int t) const { mbarrier_wait(v_full + 8 * (t % STAGES), (t / STAGES) & 1); }
  __device__ bool test_k(int t) const { return mbarrier_test(k_full + 8 * (t % STAGES), (t / STAGES) & 1); }
  __device__ bool test_v(int t) const { return mbarrier_test(v_full + 8 * (t % STAGES), (t / STAGES) & 1); }
  // Called by every consumer warp once it is done with tile t's K and V (or,
  // with F::kSplitRelease, with its K, then with its V: v_only).
  __device__ void release(int t, int lane, bool v_only = false) const {
    __syncwarp();
    if (lane == 0) {
      const uint32_t bar = (v_only ? v_empty : empty) + 8 * (t % STAGES);
      if constexpr (CLUSTER == 1) {
        mbarrier_arrive(bar);
      } else {
#pragma unroll
        for (int r = 0; r < CLUSTER; ++r) mbarrier_arrive_remote(cluster_address(bar, r));
      }
    }
  }
  // By one thread of the CTA, before any other touches a barrier.
  __device__ void init_barriers() const {
    for (int s = 0; s < STAGES; ++s) {
      if constexpr (F::kSplitRelease) mbarrier_init(v_empty + 8 * s, S::kConsumerWarps * CLUSTER);
      mbarrier_init(k_full + 8 * s, F::kIssuers);  // the issuers' arrives, plus the copies' bytes
      mbarrier_init(v_full + 8 * s, F::kIssuers);
      mbarrier_init(empty + 8 * s, S::kConsumerWarps * CLUSTER);  // one arrive per consumer warp of the cluster
    }
    for (int s = 0; s < 2; ++s) {
      mbarrier_init(item_full + 8 * s, 1);  // the scheduling thread's arrive
      // Every consumer thread (each read the slot) and issuer of the cluster
      // but the scheduling one (only the first CTA's barrier is used).
      mbarrier_init(item_empty + 8 * s, (S::kConsumerThreads + F::kIssuers) * CLUSTER - 1);
    }
    mbarrier_init(q_full, 1);                     // the issuing thread's arrive, plus the copies' bytes
    mbarrier_init(q_empty, S::kConsumerThreads);  // every consumer thread, once its Q is in registers
    mbarrier_init_fence();
  }
};

}  // namespace exactly::kernels::cuda
