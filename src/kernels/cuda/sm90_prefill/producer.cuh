// The producer warpgroup of the Hopper prefill kernel: lane 0 of each of its
// first F::kIssuers warps copies the CTA's K/V tiles into the ring of stages
// with the tensor memory accelerator, and the first of them each item's Q
// (F::kQByTma), while the consumers work on earlier tiles.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/prefill_schedule.h"
#include "kernels/cuda/sm90_prefill/features.cuh"
#include "kernels/cuda/sm90_prefill/hook.cuh"
#include "kernels/cuda/sm90_prefill/stages.cuh"
#include "kernels/cuda/sm90_prefill/tile_scheduler.cuh"
#include "kernels/cuda/tma_primitives.cuh"

namespace exactly::kernels::cuda {

template <class F, class Hook = Sm90WsNoHook>
class Sm90WsProducer {
 public:
  // k_map, v_map: the KV pools [slots, KV heads, D] in boxes of F::kCopyKeys
  // slots; q_map: the queries [tokens, heads, D] in boxes of a query block's
  // rows, read only with F::kQByTma (all make_heads_tensor_map).
  __device__ Sm90WsProducer(const Sm90WsStages<F>& st, const CUtensorMap* k_map, const CUtensorMap* v_map,
                            const CUtensorMap* q_map, const PrefillParams& p)
      : st_(st), k_map_(k_map), v_map_(v_map), q_map_(q_map), p_(p) {}

  // The producer warpgroup over the CTA's items, as the tile scheduler hands
  // them out. With F::kQByTma the first issuer copies each item's Q before
  // its K/V, so the consumers wait for no global load between items.
  __device__ void run(const Sm90WsSchedule& sched, int tid) const {
    constexpr int ISSUERS = F::kIssuers, CLUSTER = F::kCluster;
    const int warp = tid / 32;
    if (warp >= ISSUERS || tid % 32 != 0) return;
    const int rank = CLUSTER > 1 ? int(cluster_rank()) : 0;
    const bool scheduler = warp == 0 && rank == 0;
    Sm90WsTileScheduler<F> items(st_, sched, p_);
    int tile_base = 0;
    for (int k = 0;; ++k) {
      const Sm90WsDesc d = items.produce_item(k, scheduler);
      if (!items.valid(d)) break;
      if constexpr (F::kQByTma) {
        if (warp == 0 && (!Hook::keeps_first_q() || k == 0)) load_q(d, k);
      }
      const int n_tiles = d.tile_end - d.tile0;
      load_kv(d.seq, d.head / p_.group, d.pair_keys, n_tiles, tid, tile_base, rank, d.tile0);
      tile_base += n_tiles;
      if (scheduler) items.advance();
    }
    items.finish(scheduler);
  }

  // Item k's Q into shared memory, once the consumers are done with the
  // previous one's.
  __device__ void load_q(const Sm90WsDesc& d, int k) const {
    using S = Sm90WsShape<F>;
    mbarrier_wait(st_.q_empty, (k & 1) ^ 1);
    mbarrier_arrive_expect_tx(st_.q_full, S::kQBytes);
#pragma unroll
    for (int panel = 0; panel < S::kPanels; ++panel)
      tma_load_3d(st_.q + panel * S::kQPanelBytes, q_map_, panel * 64, d.head, d.q_begin + d.m0, st_.q_full);
  }

  // One item's K/V tiles: lane 0 of each of the first F::kIssuers warps of
  // each CTA of the cluster copies its share of each tile, K before V, into
  // the tile's stage (of every CTA of the cluster) once the consumers have
  // released it. A copy is GROUP keys of one 64-column panel (GROUP divides
  // the block size, so a copy never leaves its block); with as many groups
  // in a tile as issuers or more, each issuer takes whole groups, otherwise
  // one (group, panel) copy each, spread over the CTAs of the cluster, and
  // issuers left over copy nothing. The item's tiles are the CTA's
  // tile_base, tile_base + 1, ...; each CTA's full barriers expect the whole
  // tile, a share from each of its issuers, whichever CTA issued the copies.
  // n_keys: the keys the tiles cover; first_tile: the item's first key tile
  // (a piece of a split item starts past 0).
  __device__ void load_kv(int seq, int kv_head, int n_keys, int n_tiles, int tid, int tile_base = 0, int rank = 0,
                          int first_tile = 0) const {
    using S = Sm90WsShape<F>;
    constexpr int BN = F::kTileKeys, STAGES = F::kStages, ISSUERS = F::kIssuers, D = F::kHeadDim;
    constexpr int CLUSTER = F::kCluster, GROUP = F::kCopyKeys;
    constexpr int kIssuers = ISSUERS * CLUSTER, kGroupsPerTile = BN / GROUP;
    constexpr bool kWholeGroups = kGroupsPerTile >= kIssuers;
    static_assert(BN % GROUP == 0 && GROUP % 16 == 0, "whole 16-key groups per tile");
    static_assert(kWholeGroups || kGroupsPerTile * S::kPanels % kIssuers == 0 || kGroupsPerTile * S::kPanels < kIssuers,
                  "one copy per issuer");
    const int warp = tid / 32;
    if (warp >= ISSUERS || tid % 32 != 0) return;
    const int issuer = kWholeGroups ? rank * ISSUERS + warp : warp * CLUSTER + rank;
    // Copies of K (and as many of V) per tile by this issuer: up to kCopies
    // groups (kPanels panels each; with 11 groups over 4 issuers, the last
    // issuer has one fewer), or one (group, panel), or none.
    constexpr int kCopies = kWholeGroups ? (kGroupsPerTile + kIssuers - 1) / kIssuers : 1;
    const bool idle = !kWholeGroups && issuer >= kGroupsPerTile * S::kPanels;
    constexpr uint32_t kBytes = BN * D * 2 / ISSUERS;  // of K (and of V) landing here, per local issuer
    const int32_t* table = p_.block_tables + int64_t{seq} * p_.max_blocks_per_seq;
    for (int t = 0; t < n_tiles; ++t) {
      const int g = tile_base + t;
      const int s = g % STAGES;
      constexpr bool kSplitRelease = F::kSplitRelease;
      mbarrier_wait(st_.empty + 8 * s, ((g / STAGES) & 1) ^ 1);  // K's stage (and V's, unless split)
      if (Hook::skips_copies(g, STAGES)) {
        mbarrier_arrive(st_.k_full + 8 * s);
        mbarrier_arrive(st_.v_full + 8 * s);
        continue;
      }
      mbarrier_arrive_expect_tx(st_.k_full + 8 * s, kBytes);
      // With kSplitRelease V's half of the stage is awaited on its own,
      // after this issuer's K copies.
      auto expect_v = [&] {
        if constexpr (kSplitRelease) mbarrier_wait(st_.v_empty + 8 * s, ((g / STAGES) & 1) ^ 1);
        mbarrier_arrive_expect_tx(st_.v_full + 8 * s, kBytes);
      };
      if constexpr (!kSplitRelease) expect_v();
      if (idle) {
        if constexpr (kSplitRelease) expect_v();
        continue;
      }
      int group[kCopies], slots[kCopies];  // table lookups all in flight at once
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        group[i] = kWholeGroups ? i * kIssuers + issuer : issuer / S::kPanels;
        int key0 = (first_tile + t) * BN + group[i] * GROUP;
        // A whole group past the end (or past the tile, for an issuer with one
        // fewer): any finite block, masked or not copied.
        if (key0 >= n_keys || (kGroupsPerTile % kIssuers != 0 && group[i] >= kGroupsPerTile)) key0 = 0;
        slots[i] = table[key0 / p_.block_size] * p_.block_size + key0 % p_.block_size;
      }
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        if (kSplitRelease && kv == 1) expect_v();
#pragma unroll
        for (int i = 0; i < kCopies; ++i)
#pragma unroll
          for (int j = 0; j < (kWholeGroups ? S::kPanels : 1); ++j) {
            if (kGroupsPerTile % kIssuers != 0 && group[i] >= kGroupsPerTile) continue;
            const int panel = kWholeGroups ? j : issuer % S::kPanels;
            const uint32_t dst = s * S::kTileBytes + panel * S::kPanelBytes + group[i] * GROUP * 128;
            const uint32_t base = kv == 0 ? st_.k : st_.v, bar = (kv == 0 ? st_.k_full : st_.v_full) + 8 * s;
            if constexpr (CLUSTER == 1) {
              tma_load_3d(base + dst, kv == 0 ? k_map_ : v_map_, panel * 64, kv_head, slots[i], bar);
            } else {
              tma_load_3d_multicast(base + dst, kv == 0 ? k_map_ : v_map_, panel * 64, kv_head, slots[i], bar,
                                    (1u << CLUSTER) - 1);
            }
          }
      }
    }
  }

 private:
  const Sm90WsStages<F>& st_;
  const CUtensorMap *k_map_, *v_map_, *q_map_;
  const PrefillParams& p_;
};

}  // namespace exactly::kernels::cuda
