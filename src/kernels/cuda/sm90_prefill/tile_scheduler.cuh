// The tile scheduler of the Hopper prefill kernel: which work item each CTA
// takes next (the order itself is plain arithmetic, prefill_schedule.h), and
// how an item's description reaches the CTA's warps.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/prefill_schedule.h"
#include "kernels/cuda/sm90_prefill/stages.cuh"
#include "kernels/cuda/tma_primitives.cuh"

namespace exactly::kernels::cuda {

// A work item as one CTA sees it, published by the scheduling thread so that
// no other warp reads the sequence's lengths from global memory (in the
// consumers that would stall a step). item >= n_items: none is left. n_keys:
// the keys this CTA's query block sees; pair_keys: the most any CTA of the
// cluster sees, which is what the tiles cover (so pair_keys - n_keys < 128,
// and a query block past the query computes the pair's keys and stores
// nothing). The item's key tiles are [tile0, tile_end): all of them, or one
// piece's stretch (piece >= 0: its index among all split items' pieces).
struct Sm90WsDesc {
  int item, seq, head, m0, q_begin, q_len, ctx_len, n_keys, pair_keys, tile0, tile_end, piece;
};

// Index i (sm90_ws_slot) as this CTA sees it: it takes the item's query
// block `which`.
__device__ __forceinline__ Sm90WsDesc sm90_ws_describe(int i, const Sm90WsSchedule& sched, const PrefillParams& p,
                                                       int block_rows, int cluster = 1, int which = 0, int bn = 128) {
  const Sm90WsSlot slot = sm90_ws_slot(i, sched, cluster);
  const int per_head = (sched.n_mblocks + cluster - 1) / cluster;
  const int seq_head = slot.seq_head;
  const int seq = seq_head / p.n_heads;
  const int first_block = (per_head - 1 - slot.rank) * cluster;
  const int m0 = (first_block + which) * block_rows;
  const int q_begin = p.query_start[seq];
  const int q_len = p.query_start[seq + 1] - q_begin;
  const int ctx_len = p.seq_lens[seq];
  auto keys = [&](int m) { return p.causal ? min(ctx_len, ctx_len - q_len + min(q_len, m + block_rows)) : ctx_len; };
  const int last_block = min(first_block + cluster - 1, max(q_len - 1, 0) / block_rows);
  const int pair_keys = keys(last_block * block_rows);
  const int tiles = (pair_keys + bn - 1) / bn;
  return {i,
          seq,
          seq_head % p.n_heads,
          m0,
          q_begin,
          q_len,
          ctx_len,
          m0 < q_len ? keys(m0) : pair_keys,
          pair_keys,
          sm90_ws_part_first(tiles, slot.part, slot.parts),
          sm90_ws_part_end(tiles, slot.part, slot.parts),
          slot.piece};
}
// Whether the item has any query row: its first block starts inside the query.
__device__ __forceinline__ bool sm90_ws_has_rows(const Sm90WsDesc& d, int block_rows, int which) {
  return d.m0 - which * block_rows < d.q_len;
}

__device__ __forceinline__ void sm90_ws_store_desc(uint32_t addr, const Sm90WsDesc& d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(d.item), "r"(d.seq), "r"(d.head), "r"(d.m0)
               : "memory");
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr + 16), "r"(d.q_begin), "r"(d.q_len),
               "r"(d.ctx_len), "r"(d.n_keys)
               : "memory");
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr + 32), "r"(d.pair_keys), "r"(d.tile0),
               "r"(d.tile_end), "r"(d.piece)
               : "memory");
}
// The same into another CTA of the cluster, completing its phase of the slot's
// item_full barrier (both given by cluster addresses).
__device__ __forceinline__ void sm90_ws_store_desc_remote(uint32_t addr, uint32_t full, const Sm90WsDesc& d) {
  mbarrier_arrive_expect_tx_cluster(full, 48);
  st_async_v4(addr, d.item, d.seq, d.head, d.m0, full);
  st_async_v4(addr + 16, d.q_begin, d.q_len, d.ctx_len, d.n_keys, full);
  st_async_v4(addr + 32, d.pair_keys, d.tile0, d.tile_end, d.piece, full);
}
__device__ __forceinline__ Sm90WsDesc sm90_ws_load_desc(uint32_t addr) {
  Sm90WsDesc d;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d.item), "=r"(d.seq), "=r"(d.head), "=r"(d.m0)
               : "r"(addr)
               : "memory");
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d.q_begin), "=r"(d.q_len), "=r"(d.ctx_len), "=r"(d.n_keys)
               : "r"(addr + 16)
               : "memory");
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d.pair_keys), "=r"(d.tile0), "=r"(d.tile_end), "=r"(d.piece)
               : "r"(addr + 32)
               : "memory");
  return d;
}

// Item k of a CTA passes through a two-slot ring: the scheduling thread (the
// first producer warp of the cluster's first CTA) describes it and publishes
// it for every CTA of the cluster; every consumer thread and the other
// issuing warps wait for it there, and each frees the slot once done with
// it. The CTA's first item is its cluster's index, the rest come from the
// counter (without one, a plain grid: one item per cluster). Items without
// query rows are skipped and never published. In a cluster of two the CTAs
// take the item's two query blocks in turn, the longer one (under a causal
// mask) to each CTA every other item, so neither falls behind by more than
// a tile.
template <class F>
class Sm90WsTileScheduler {
 public:
  __device__ Sm90WsTileScheduler(const Sm90WsStages<F>& st, const Sm90WsSchedule& sched, const PrefillParams& p)
      : st_(st), sched_(sched), p_(p) {}

  // Whether d is an item (not the end of the CTA's work).
  __device__ __forceinline__ bool valid(const Sm90WsDesc& d) const { return d.item < sched_.n_items; }

  // Item k for an issuing producer thread: the scheduling one describes and
  // publishes it, the others wait for it (their warps' other lanes have
  // returned: no __syncwarp here). The scheduling thread fetches the index
  // of the one after from the counter now; advance() takes it up once this
  // item's copies are issued.
  __device__ Sm90WsDesc produce_item(int k, bool scheduling) {
    next_ = sched_.n_items;
    if (!scheduling) {
      const Sm90WsDesc d = wait(k);
      free(k);
      return d;
    }
    constexpr int kRows = Sm90WsShape<F>::kBM, CLUSTER = F::kCluster;
    static_assert(CLUSTER == 1 || CLUSTER == 2, "query blocks per item");
    Sm90WsDesc d, other;  // other: the item as the cluster's second CTA sees it
    const int which = CLUSTER > 1 ? k & 1 : 0;
    for (;; item_ = take()) {
      if (item_ >= sched_.n_items) {
        d = other = Sm90WsDesc{sched_.n_items};
        break;
      }
      d = sm90_ws_describe(item_, sched_, p_, kRows, CLUSTER, which, F::kTileKeys);
      // Described here, next to d, the compiler reuses d's loads of the
      // sequence's lengths (after the wait below it would load them again).
      if constexpr (CLUSTER > 1) other = sm90_ws_describe(item_, sched_, p_, kRows, CLUSTER, which ^ 1, F::kTileKeys);
      if (sm90_ws_has_rows(d, kRows, which) && d.tile_end > d.tile0) break;  // a short item's piece may be empty
    }
    mbarrier_wait(st_.item_empty + 8 * (k & 1), ((k >> 1) & 1) ^ 1);
    sm90_ws_store_desc(st_.item_slot(k), d);
    if constexpr (CLUSTER > 1)
      sm90_ws_store_desc_remote(cluster_address(st_.item_slot(k), 1), cluster_address(st_.item_full + 8 * (k & 1), 1),
                                other);
    mbarrier_arrive(st_.item_full + 8 * (k & 1));
    if (valid(d)) next_ = take();
    return d;
  }
  __device__ void advance() { item_ = next_; }
  // An issuing producer thread after its last item: the scheduling thread of
  // the last cluster to finish zeroes the counter for the next launch (by
  // then every cluster has taken its last index).
  __device__ void finish(bool scheduling) const {
    if (sched_.counter != nullptr && scheduling && atomicAdd(sched_.counter + 1, 1) == clusters_ - 1) {
      sched_.counter[0] = 0;
      sched_.counter[1] = 0;
    }
  }

  // Item k, once published. A consumer warp waits with all lanes present;
  // the slot stays a thread's until it frees it.
  __device__ __forceinline__ Sm90WsDesc wait(int k) const {
    if constexpr (F::kCluster == 1) {
      mbarrier_wait(st_.item_full + 8 * (k & 1), (k >> 1) & 1);
    } else {  // the slot was written by the cluster's first CTA
      mbarrier_wait_cluster(st_.item_full + 8 * (k & 1), (k >> 1) & 1);
    }
    return at(k);
  }
  // Item k again, while its slot is held.
  __device__ __forceinline__ Sm90WsDesc at(int k) const { return sm90_ws_load_desc(st_.item_slot(k)); }
  // Done with item k's slot: each thread that read it arrives for its own
  // reads (one arrive per warp after a __syncwarp is as correct, but
  // compute-sanitizer's racecheck does not see the other lanes' reads as
  // ordered before it).
  __device__ __forceinline__ void free(int k) const {
    if constexpr (F::kCluster == 1) {
      mbarrier_arrive(st_.item_empty + 8 * (k & 1));
    } else {
      // Without a cluster-scope release, which would make a consumer thread
      // wait for its stores of O to reach L2: what the slot's next writer
      // must follow is only this thread's reads of the slot, whose values
      // were all used before this arrive.
      mbarrier_arrive_remote(cluster_address(st_.item_empty + 8 * (k & 1), 0));
    }
  }

 private:
  __device__ __forceinline__ int take() const {
    return sched_.counter != nullptr ? clusters_ + atomicAdd(sched_.counter, 1) : sched_.n_items;
  }

  const Sm90WsStages<F>& st_;
  const Sm90WsSchedule& sched_;
  const PrefillParams& p_;
  int clusters_ = int(gridDim.x) / F::kCluster;
  int item_ = int(blockIdx.x) / F::kCluster;  // the scheduling thread's next index
  int next_ = 0;                              // the one after
};

}  // namespace exactly::kernels::cuda
