// Hopper FlashAttention prefill with warp specialisation in the manner of
// FlashAttention-3: a producer warpgroup (four threads issuing, registers given
// back with setmaxnreg) moves K/V tiles into shared memory with the tensor
// memory accelerator, one bulk copy per 16-key block-table entry and 64-column
// panel, completing on "full" mbarriers per stage (K and V apart); two
// consumer warpgroups of 64 query rows (three at head dim 64) run the wgmma
// products and the softmax (online_softmax.cuh), and release each stage on
// its "empty" mbarrier. Inside a consumer, tile t's scores are issued, then
// P_{t-1} V_{t-1}, then the softmax of tile t, then the wait for that
// product (FlashAttention-3's intra-warpgroup order; ptxas hoists the wait
// above the softmax, so in practice the consumer warpgroups overlap each
// other's softmax with their products: dev/cuda/NOTES.md, v38). No consumer
// thread computes a K/V address or waits at a CTA-wide barrier. bf16, head
// dim 64 or 128 (one or two 64-column panels per K/V row).
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
// while the consumers finish the current one. The consumers run their steps on
// across items too: the next item's Q is loaded once the current item's last
// scores are done, and its first tile is scored, and its softmax run, under the
// current item's last P V. So neither the pipeline nor an item's first and last
// steps stand alone between items. With kQByTma the producer copies each item's Q
// into shared memory ahead of its K/V, and the consumers take it into registers
// with ldmatrix, or the scores read it there (kQShared, at head dim 64);
// otherwise they load it from global memory themselves, which at head dim 128
// exposes its latency between items.
//
// In clusters of two (FlashAttention-3's ClusterM = 2), an
// item is two adjacent query blocks of one head, one per CTA, and each K/V
// tile is copied once into both CTAs (TMA multicast, each CTA's producer
// issuing half of it): half the L2 traffic and half the copies per CTA. The
// cluster's first CTA schedules for both. Under a causal mask the two blocks
// see different numbers of keys; the CTA with fewer waits out the other's
// extra tile without computing it, and the longer block alternates between
// the CTAs, so neither falls behind by more than a tile.
//
// Keys past the sequence's length inside its last block are read as they are
// in the pool and masked; the pool must hold finite values there (the engine
// zeroes it at allocation and only ever writes finite K/V).
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/cuda/prefill_schedule.h"
#include "kernels/cuda/sm90_prefill/features.cuh"
#include "kernels/cuda/sm90_prefill/hook.cuh"
#include "kernels/cuda/tma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"

namespace exactly::kernels::cuda {

// Where a CTA's stages and their barriers live in shared memory. K and V of a
// stage complete on barriers of their own, so a tile's scores can start once
// its K has landed, while its V is still on the way. In a cluster of CLUSTER
// CTAs every stage is filled in all of them at once (multicast), so a stage
// is empty only once the consumers of every CTA have released it: each
// consumer warp arrives on the empty barrier of each CTA.
template <class F>
struct Sm90WsStages {
  using S = Sm90WsShape<F>;
  static constexpr int STAGES = F::kStages, CLUSTER = F::kCluster;
  uint32_t k, v, q, k_full, v_full, empty, item_full, item_empty, q_full, q_empty, v_empty, items;
  __device__ explicit Sm90WsStages(uint32_t base)
      : k(base),
        v(base + STAGES * S::kTileBytes),
        q(base + 2 * STAGES * S::kTileBytes),
        k_full(q + S::kQBytes + 2 * 64),
        v_full(k_full + STAGES * 8),
        empty(k_full + 2 * STAGES * 8),
        item_full(empty + STAGES * 8),
        item_empty(item_full + 2 * 8),
        q_full(item_empty + 2 * 8),
        q_empty(q_full + 8),
        v_empty(q_empty + 8),
        items(q + S::kQBytes) {}
  __device__ uint32_t item_slot(int k) const { return items + 64 * (k & 1); }
  __device__ uint32_t k_tile(int t) const { return k + (t % STAGES) * S::kTileBytes; }
  __device__ uint32_t v_tile(int t) const { return v + (t % STAGES) * S::kTileBytes; }
  __device__ void wait_k(int t) const { mbarrier_wait(k_full + 8 * (t % STAGES), (t / STAGES) & 1); }
  __device__ void wait_v(int t) const { mbarrier_wait(v_full + 8 * (t % STAGES), (t / STAGES) & 1); }
  __device__ bool test_k(int t) const { return mbarrier_test(k_full + 8 * (t % STAGES), (t / STAGES) & 1); }
  __device__ bool test_v(int t) const { return mbarrier_test(v_full + 8 * (t % STAGES), (t / STAGES) & 1); }
  // Tile indices count on across a CTA's work items, so stages and phases carry
// over. Called by every consumer warp once it is done with tile t's K and V.
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
};

template <class F>
__device__ void sm90_ws_init_barriers(const Sm90WsStages<F>& st) {
  using S = Sm90WsShape<F>;
  constexpr int STAGES = F::kStages, ISSUERS = F::kIssuers, CLUSTER = F::kCluster;
  for (int s = 0; s < STAGES; ++s) {
    if constexpr (F::kSplitRelease) mbarrier_init(st.v_empty + 8 * s, S::kConsumerWarps * CLUSTER);
    mbarrier_init(st.k_full + 8 * s, ISSUERS);  // the issuers' arrives, plus the copies' bytes
    mbarrier_init(st.v_full + 8 * s, ISSUERS);
    mbarrier_init(st.empty + 8 * s, S::kConsumerWarps * CLUSTER);  // one arrive per consumer warp of the cluster
  }
  for (int s = 0; s < 2; ++s) {
    mbarrier_init(st.item_full + 8 * s, 1);  // the scheduling thread's arrive
    // Every consumer thread (each read the slot) and issuer of the cluster
    // but the scheduling one (only the first CTA's barrier is used).
    mbarrier_init(st.item_empty + 8 * s, (S::kConsumerThreads + ISSUERS) * CLUSTER - 1);
  }
  mbarrier_init(st.q_full, 1);                     // the issuing thread's arrive, plus the copies' bytes
  mbarrier_init(st.q_empty, S::kConsumerThreads);  // every consumer thread, once its Q is in registers
  mbarrier_init_fence();
}

// The producer warpgroup's work for one item: lane 0 of each of the first
// ISSUERS warps of each CTA of the cluster copies its share of each tile,
// K before V, into the tile's stage (of every CTA of the cluster) once the
// consumers have released it. A copy is GROUP keys of one 64-column panel
// (GROUP divides the block size, so a copy never leaves its block); with
// as many groups in a tile as issuers or more, each issuer takes whole
// groups, otherwise one (group, panel) copy each, spread over the CTAs of
// the cluster, and issuers left over copy nothing. The item's tiles are the
// CTA's tile_base, tile_base + 1, ...; each CTA's full barriers expect the
// whole tile, a share from each of its issuers, whichever CTA issued the
// copies. first_tile: the item's first key tile (a piece of a split item
// starts past 0).
template <class F, class Hook = Sm90WsNoHook>
__device__ void sm90_ws_produce(const Sm90WsStages<F>& st, const CUtensorMap* k_map, const CUtensorMap* v_map,
                                const PrefillParams& p, int seq, int kv_head, int n_keys, int n_tiles, int tid,
                                int tile_base = 0, int rank = 0, int first_tile = 0) {
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
  const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;
  for (int t = 0; t < n_tiles; ++t) {
    const int g = tile_base + t;
    const int s = g % STAGES;
    constexpr bool kSplitRelease = F::kSplitRelease;
    mbarrier_wait(st.empty + 8 * s, ((g / STAGES) & 1) ^ 1);  // K's stage (and V's, unless split)
    if (Hook::skips_copies(g, STAGES)) {
      mbarrier_arrive(st.k_full + 8 * s);
      mbarrier_arrive(st.v_full + 8 * s);
      continue;
    }
    mbarrier_arrive_expect_tx(st.k_full + 8 * s, kBytes);
    // With kSplitRelease V's half of the stage is awaited on its own,
    // after this issuer's K copies.
    auto expect_v = [&] {
      if constexpr (kSplitRelease) mbarrier_wait(st.v_empty + 8 * s, ((g / STAGES) & 1) ^ 1);
      mbarrier_arrive_expect_tx(st.v_full + 8 * s, kBytes);
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
      slots[i] = table[key0 / p.block_size] * p.block_size + key0 % p.block_size;
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
          const uint32_t base = kv == 0 ? st.k : st.v, bar = (kv == 0 ? st.k_full : st.v_full) + 8 * s;
          if constexpr (CLUSTER == 1) {
            tma_load_3d(base + dst, kv == 0 ? k_map : v_map, panel * 64, kv_head, slots[i], bar);
          } else {
            tma_load_3d_multicast(base + dst, kv == 0 ? k_map : v_map, panel * 64, kv_head, slots[i], bar,
                                  (1u << CLUSTER) - 1);
          }
        }
    }
  }
}

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
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(d.item), "r"(d.seq), "r"(d.head),
               "r"(d.m0)
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

// Item k of this CTA, passed through a two-slot ring: the scheduling thread
// (the first producer warp of the cluster's first CTA) publishes it for every
// CTA of the cluster (fetching the one after from the counter); every
// consumer thread and the other issuing warps read it. A consumer warp's
// wait, all lanes present; the slot stays a thread's until it arrives on the
// first CTA's item_empty.
template <class F>
__device__ __forceinline__ Sm90WsDesc sm90_ws_wait_item(const Sm90WsStages<F>& st, int k) {
  if constexpr (F::kCluster == 1) {
    mbarrier_wait(st.item_full + 8 * (k & 1), (k >> 1) & 1);
  } else {  // the slot was written by the cluster's first CTA
    mbarrier_wait_cluster(st.item_full + 8 * (k & 1), (k >> 1) & 1);
  }
  return sm90_ws_load_desc(st.item_slot(k));
}
// Done with item k's slot: each thread that read it arrives for its own
// reads (one arrive per warp after a __syncwarp is as correct, but
// compute-sanitizer's racecheck does not see the other lanes' reads as
// ordered before it).
template <class F>
__device__ __forceinline__ void sm90_ws_free_item(const Sm90WsStages<F>& st, int k) {
  if constexpr (F::kCluster == 1) {
    mbarrier_arrive(st.item_empty + 8 * (k & 1));
  } else {
    // Without a cluster-scope release, which would make a consumer thread
    // wait for its stores of O to reach L2 (about 2% at 4k tokens,
    // measured): what the slot's next writer must follow is only this
    // thread's reads of the slot, whose values were all used before this
    // arrive.
    mbarrier_arrive_remote(cluster_address(st.item_empty + 8 * (k & 1), 0));
  }
}

// The end of a piece of a split item (sm90_ws_split) in a consumer warp: its
// partial result (o unnormalised, the rows' raw maxima mx and sums) into the
// workspace, then an arrival for the warp's rows. The last of the item's
// pieces to arrive merges them all in piece order, whichever arrived last,
// into o and sum and returns true (store them); the others return false.
// Each lane fences its own writes before the count and after reading it
// (the pattern of a last-block reduction); the pieces are read from L2.
template <class F>
__device__ __forceinline__ bool sm90_ws_merge_piece(const Sm90WsSchedule& sched, const Sm90WsDesc& w,
                                                    float (&o)[F::kHeadDim / 2], const float (&mx)[2],
                                                    float (&sum)[2], int ctid, float scale_log2, int bn) {
  using S = Sm90WsShape<F>;
  constexpr int D = F::kHeadDim, CLUSTER = F::kCluster;
  constexpr int kChunks = Sm90WsPartial<D>::kChunks, kThreads = S::kConsumerThreads;
  // Which of the item's query blocks this CTA holds: in a cluster the CTAs
  // take the two blocks in turns, so the CTA's rank does not say.
  const int half = (w.m0 / S::kBM) % CLUSTER;
  const int pieces = sched.split_pieces, split = w.piece / pieces, first = split * pieces;
  const int tiles = (w.pair_keys + bn - 1) / bn;
  auto slot = [&](int piece) {
    return reinterpret_cast<float4*>(sched.partials) + (int64_t{piece} * CLUSTER + half) * kChunks * kThreads + ctid;
  };
  // A piece of an item shorter than `pieces` tiles may be empty: it never ran.
  auto ran = [&](int part) { return sm90_ws_part_first(tiles, part, pieces) != sm90_ws_part_end(tiles, part, pieces); };
  float4* mine = slot(w.piece);
#pragma unroll
  for (int c = 0; c < D / 8; ++c)
    mine[c * kThreads] = make_float4(o[4 * c], o[4 * c + 1], o[4 * c + 2], o[4 * c + 3]);
  mine[(kChunks - 1) * kThreads] = make_float4(mx[0], mx[1], sum[0], sum[1]);
  __threadfence();
  __syncwarp();
  int* arrivals = sched.arrivals + (split * CLUSTER + half) * S::kConsumerWarps + ctid / 32;
  int last = 0;
  if (ctid % 32 == 0) last = atomicAdd(arrivals, 1) == min(pieces, tiles) - 1;
  if (!__shfl_sync(0xffffffffu, last, 0)) return false;
  if (ctid % 32 == 0) *arrivals = 0;  // every piece has arrived: zero for the next launch
  __threadfence();
  float base[2] = {-INFINITY, -INFINITY};
  for (int part = 0; part < pieces; ++part) {
    if (!ran(part)) continue;
    const float4 ml = __ldcg(slot(first + part) + (kChunks - 1) * kThreads);
    if (ml.z > 0.f) base[0] = fmaxf(base[0], ml.x * scale_log2);
    if (ml.w > 0.f) base[1] = fmaxf(base[1], ml.y * scale_log2);
  }
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  sum[0] = sum[1] = 0.f;
  for (int part = 0; part < pieces; ++part) {
    if (!ran(part)) continue;
    const float4* from = slot(first + part);
    const float4 ml = __ldcg(from + (kChunks - 1) * kThreads);
    // A piece's output is relative to 2^(its maximum x scale); a row that saw
    // no key there has a zero sum and adds nothing.
    const float f0 = ml.z > 0.f ? exp2_approx(fmaf(ml.x, scale_log2, -base[0])) : 0.f;
    const float f1 = ml.w > 0.f ? exp2_approx(fmaf(ml.y, scale_log2, -base[1])) : 0.f;
    sum[0] += ml.z * f0;
    sum[1] += ml.w * f1;
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      const float4 v = __ldcg(from + c * kThreads);
      o[4 * c] += v.x * f0;
      o[4 * c + 1] += v.y * f0;
      o[4 * c + 2] += v.z * f1;
      o[4 * c + 3] += v.w * f1;
    }
  }
  return true;
}

// The producer warpgroup over the CTA's items: the cluster's first, then
// (with a counter) those the counter hands out. Items without query rows are
// skipped here and never published. In a cluster of two the CTAs take the
// item's two query blocks in turn, the longer one (under a causal mask) to
// each CTA every other item, so neither falls behind by more than a tile.
// With QTMA each CTA's first issuer copies the item's Q into shared memory
// before its K/V, once the consumers have taken the previous item's Q into
// registers: the consumers then wait for no global load between items.
template <class F, class Hook = Sm90WsNoHook>
__device__ void sm90_ws_producer(const Sm90WsStages<F>& st, const CUtensorMap* k_map, const CUtensorMap* v_map,
                                 const CUtensorMap* q_map, const PrefillParams& p, const Sm90WsSchedule& sched,
                                 int tid) {
  constexpr int BN = F::kTileKeys, ISSUERS = F::kIssuers, CLUSTER = F::kCluster;
  static_assert(CLUSTER == 1 || CLUSTER == 2, "query blocks per item");
  constexpr int kRows = Sm90WsShape<F>::kBM;
  const int warp = tid / 32;
  if (warp >= ISSUERS || tid % 32 != 0) return;
  const int rank = CLUSTER > 1 ? int(cluster_rank()) : 0;
  const bool scheduler = warp == 0 && rank == 0;
  const int clusters = int(gridDim.x) / CLUSTER;
  auto take = [&] { return sched.counter != nullptr ? clusters + atomicAdd(sched.counter, 1) : sched.n_items; };
  int item = int(blockIdx.x) / CLUSTER, tile_base = 0;
  for (int k = 0;; ++k) {
    Sm90WsDesc d, other;  // other: the item as the cluster's second CTA sees it
    int next = sched.n_items;
    if (scheduler) {
      const int which = CLUSTER > 1 ? k & 1 : 0;
      for (;; item = take()) {
        if (item >= sched.n_items) {
          d = other = Sm90WsDesc{sched.n_items};
          break;
        }
        d = sm90_ws_describe(item, sched, p, kRows, CLUSTER, which, BN);
        // Described here, next to d, the compiler reuses d's loads of the
        // sequence's lengths (after the wait below it would load them again).
        if constexpr (CLUSTER > 1) other = sm90_ws_describe(item, sched, p, kRows, CLUSTER, which ^ 1, BN);
        if (sm90_ws_has_rows(d, kRows, which) && d.tile_end > d.tile0) break;  // a short item's piece may be empty
      }
      mbarrier_wait(st.item_empty + 8 * (k & 1), ((k >> 1) & 1) ^ 1);
      sm90_ws_store_desc(st.item_slot(k), d);
      if constexpr (CLUSTER > 1)
        sm90_ws_store_desc_remote(cluster_address(st.item_slot(k), 1), cluster_address(st.item_full + 8 * (k & 1), 1),
                                  other);
      mbarrier_arrive(st.item_full + 8 * (k & 1));
      if (d.item < sched.n_items) next = take();  // fetched now, used after this item's copies are issued
    } else {  // the warp's other lanes have returned: no __syncwarp here
      d = sm90_ws_wait_item(st, k);
      sm90_ws_free_item(st, k);
    }
    if (d.item >= sched.n_items) break;
    if constexpr (F::kQByTma) {
      if (warp == 0 && (!Hook::keeps_first_q() || k == 0)) {
        using S = Sm90WsShape<F>;
        mbarrier_wait(st.q_empty, (k & 1) ^ 1);
        mbarrier_arrive_expect_tx(st.q_full, S::kQBytes);
#pragma unroll
        for (int panel = 0; panel < S::kPanels; ++panel)
          tma_load_3d(st.q + panel * S::kQPanelBytes, q_map, panel * 64, d.head, d.q_begin + d.m0, st.q_full);
      }
    }
    const int n_tiles = d.tile_end - d.tile0;
    sm90_ws_produce<F, Hook>(st, k_map, v_map, p, d.seq, d.head / p.group, d.pair_keys, n_tiles, tid, tile_base,
                             rank, d.tile0);
    tile_base += n_tiles;
    if (scheduler) item = next;
  }
  // The last cluster to finish zeroes the counter for the next launch: by
  // then every cluster has taken its last index.
  if (sched.counter != nullptr && scheduler && atomicAdd(sched.counter + 1, 1) == clusters - 1) {
    sched.counter[0] = 0;
    sched.counter[1] = 0;
  }
}

// q_map: the queries [tokens, heads, D] (make_heads_tensor_map), in boxes of
// a query block's 64 x WG tokens; read only with QTMA.
template <class F, class Hook = Sm90WsNoHook>
__global__ void __launch_bounds__(128 * (F::kConsumerWarpgroups + 1), 1)
    flash_prefill_sm90_ws_kernel(const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map,
                                 const __grid_constant__ CUtensorMap q_map, const PrefillParams p,
                                 const Sm90WsSchedule sched) {
#if defined(EXACTLY_HAS_WGMMA)
  using T = __nv_bfloat16;
  using S = Sm90WsShape<F>;
  constexpr int BN = F::kTileKeys, D = F::kHeadDim, CLUSTER = F::kCluster, WG = F::kConsumerWarpgroups;
  constexpr bool QTMA = F::kQByTma;
  extern __shared__ unsigned char smem_raw[];
  const Sm90WsStages<F> st((smem_address(smem_raw) + 1023u) & ~1023u);
  const int tid = threadIdx.x;

  if (tid == 0) sm90_ws_init_barriers<F>(st);
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
    sm90_ws_producer<F, Hook>(st, &k_map, &v_map, &q_map, p, sched, tid);
    if constexpr (CLUSTER > 1) cluster_sync_all();
    return;
  }

  setmaxnreg_inc<WG == 2 ? 232 : 160>();
  const int ctid = tid - 128;
  typename Hook::Record rec;
  Hook::begin(rec, ctid);
  auto wait_k = [&](int g) { Hook::wait(rec, false, [&] { st.wait_k(g); }); };
  auto wait_v = [&](int g) { Hook::wait(rec, true, [&] { st.wait_v(g); }); };
  const int lane = ctid % 32;
  const int warp_row0 = (ctid / 32) * 16;
  const int64_t token_stride = int64_t{p.n_heads} * D;
  const T* q = static_cast<const T*>(p.q);
  T* out = static_cast<T*>(p.out);

  // With kQShared the scores read Q straight from shared memory (as
  // cuDNN's and FlashAttention-3's kernels do): no registers hold it, and its
  // buffer is the item's until the item's last scores are done (free_q).
  constexpr bool kQShared = F::kQShared;
  static_assert(!kQShared || !Hook::keeps_first_q(), "Q in shared memory, copied there per item");
  uint32_t qf[D / 16][4];
  int q_loads = 0;  // items whose Q came from shared memory (QTMA), for the phase
  auto free_q = [&] {
    if constexpr (kQShared) mbarrier_arrive(st.q_empty);
  };
  auto load_q = [&](const Sm90WsDesc& w) {
    if constexpr (kQShared) {
      mbarrier_wait(st.q_full, q_loads & 1);
      ++q_loads;
      return;
    }
    if constexpr (QTMA) {
      // ldmatrix: lanes 8m..8m+7 address matrix m of each 16 x 16 slice
      // (rows 0-7 / 8-15 by m % 2, columns 0-7 / 8-15 by m / 2), which lands
      // as the wgmma A fragment; the rows are 128-byte swizzled as TMA wrote
      // them. Rows past the query hold other tokens' queries or zeros: their
      // scores are finite, and their output is never stored.
      mbarrier_wait(st.q_full, q_loads & 1);
      const int m = lane / 8, row = warp_row0 + (m % 2) * 8 + lane % 8;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const int chunk = (ks % 4) * 2 + m / 2;
        ldmatrix_x4(qf[ks], st.q + (ks / 4) * S::kQPanelBytes + row * 128 + ((chunk ^ (row % 8)) << 4));
      }
      mbarrier_arrive(st.q_empty);
      ++q_loads;
      return;
    }
    const int r0 = w.m0 + warp_row0 + lane / 4;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = r0 + (i % 2) * 8;
        const int col = ks * 16 + (lane % 4) * 2 + (i / 2) * 8;
        qf[ks][i] = row < w.q_len ? *reinterpret_cast<const uint32_t*>(q + (w.q_begin + row) * token_stride +
                                                                       w.head * D + col)
                                  : 0u;
      }
  };
  // Each lane asks for one 128-byte line of its warp's 16 rows of the item's
  // Q (two lines per row at head dim 128), so load_q later finds them near.
  auto prefetch_q = [&](const Sm90WsDesc& w) {
    constexpr int kLines = D * 2 / 128;
    const int row = w.m0 + warp_row0 + lane / kLines;
    if (lane < 16 * kLines && row < w.q_len)
      asm volatile("prefetch.global.L1 [%0];" ::"l"(q + (w.q_begin + row) * token_stride + w.head * D +
                                                    (lane % kLines) * 64));
  };

  float o[D / 2];
  auto zero_o = [&] {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  };
  auto store_o = [&](const Sm90WsDesc& w, const float (&inv)[2]) {
    if constexpr (Hook::skips_stores()) {
      return;
    } else if constexpr (F::kQuadStores) {
      // Lane q of a row's quad holds columns 8 dt + 2q, +1 for every dt. For
      // each group of four dt, two butterfly exchanges (lanes q ^ 1, then q ^ 2,
      // each swapping the two words whose index bit differs from q's)
      // transpose the quad's 4 x 4 words, so that lane q holds dt = 4g + q's
      // eight columns, 16 bytes. The shuffles run on every lane; only the
      // stores test the row.
      const bool bit0 = (lane & 1) != 0, bit1 = (lane & 2) != 0;
      const int q4 = lane % 4;
      // One exchange with lane ^ mask of the pair (a[lo], a[hi]): a lane whose
      // bit is set keeps a[hi] and takes the partner's a[hi] into a[lo].
      auto butterfly = [](uint32_t (&a)[4], bool bit, int mask, int lo, int hi) {
        const uint32_t got = __shfl_xor_sync(0xffffffffu, bit ? a[lo] : a[hi], mask);
        a[lo] = bit ? got : a[lo];
        a[hi] = bit ? a[hi] : got;
      };
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = w.m0 + warp_row0 + lane / 4 + 8 * r;
        T* dst_row = out + (w.q_begin + row) * token_stride + w.head * D;
#pragma unroll
        for (int g = 0; g < D / 32; ++g) {
          uint32_t a[4];
#pragma unroll
          for (int i = 0; i < 4; ++i)
            a[i] = Elem<T>::pack(o[4 * (4 * g + i) + 2 * r] * inv[r], o[4 * (4 * g + i) + 2 * r + 1] * inv[r]);
          butterfly(a, bit0, 1, 0, 1);
          butterfly(a, bit0, 1, 2, 3);
          butterfly(a, bit1, 2, 0, 2);
          butterfly(a, bit1, 2, 1, 3);
          if (row < w.q_len)
            *reinterpret_cast<uint4*>(dst_row + 32 * g + 8 * q4) = make_uint4(a[0], a[1], a[2], a[3]);
        }
      }
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = w.m0 + warp_row0 + lane / 4 + 8 * r;
        if (row >= w.q_len) continue;
        uint32_t* dst =
            reinterpret_cast<uint32_t*>(out + (w.q_begin + row) * token_stride + w.head * D + (lane % 4) * 2);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          dst[dt * 4] = Elem<T>::pack(o[4 * dt + 2 * r] * inv[r], o[4 * dt + 2 * r + 1] * inv[r]);
      }
    }
  };

  float sc[BN / 2];
  uint32_t pk[BN / 16][4];

  // g: the CTA's tile index, for stages.
  auto issue_scores = [&](int g) {
    const uint64_t k_desc = wgmma_descriptor(st.k_tile(g), S::kPanelBytes, 1024);
    wgmma_keep(sc);
    wgmma_fence();
    if constexpr (kQShared) {  // this warpgroup's 64 rows of each Q panel
      const uint64_t q_desc = wgmma_descriptor(st.q + (ctid / 128) * 64 * 128, S::kQPanelBytes, 1024);
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const uint64_t desc = wgmma_descriptor_advance(k_desc, (ks / 4) * S::kPanelBytes + (ks % 4) * 32);
        const uint64_t a = wgmma_descriptor_advance(q_desc, (ks / 4) * S::kQPanelBytes + (ks % 4) * 32);
        if constexpr (BN == 64) {
          wgmma_m64n64k16_ss<0>(sc, a, desc, ks > 0);
        } else {
          wgmma_m64n128k16_ss<0>(sc, a, desc, ks > 0);
        }
      }
    } else {
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const uint64_t desc = wgmma_descriptor_advance(k_desc, (ks / 4) * S::kPanelBytes + (ks % 4) * 32);
        if constexpr (BN == 64) {
          wgmma_m64n64k16_rs<0>(sc, qf[ks], desc, ks > 0);
        } else {
          wgmma_m64n128k16_rs<0>(sc, qf[ks], desc, ks > 0);
        }
      }
    }
    wgmma_commit();
    wgmma_keep(sc);
  };
  auto issue_pv = [&](int g, bool wait = true) {
    if (wait) wait_v(g);
    const uint64_t v_desc = wgmma_descriptor(st.v_tile(g), S::kPanelBytes, 1024);
    wgmma_keep(o);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      const uint64_t desc = wgmma_descriptor_advance(v_desc, ks * 16 * 128);
      if constexpr (D == 64) {
        wgmma_m64n64k16_rs<1>(o, pk[ks], desc, 1);
      } else {
        wgmma_m64n128k16_rs<1>(o, pk[ks], desc, 1);
      }
    }
    wgmma_commit();
    wgmma_keep(o);
  };

  // The current item's tiles (the CTA's tile_base, tile_base + 1, ...): its
  // own, then any the other CTA of the cluster needs beyond them; its keys
  // and its warp's first query position.
  // A piece of a split item starts at key tile key_tile0 (split items have no
  // mask, so both CTAs of a cluster compute all of the piece's tiles).
  int n_tiles = 0, item_tiles = 0, tile_base = 0, ctx_len = 0, qpos_warp = 0, key_tile0 = 0;
  auto start = [&](const Sm90WsDesc& w) {
    key_tile0 = w.tile0;
    n_tiles = min((w.n_keys + BN - 1) / BN, w.tile_end) - w.tile0;
    item_tiles = w.tile_end - w.tile0;
    ctx_len = w.ctx_len;
    qpos_warp = w.ctx_len - w.q_len + w.m0 + warp_row0;
  };
  // The online softmax of the current item's tile t (scores in sc, in place);
  // leaves in sm.correction the factor by which O must be rescaled before
  // P_t V_t.
  OnlineSoftmax<BN> sm;
  auto softmax = [&](int t) {
    const int key0 = (key_tile0 + t) * BN;
    if constexpr (Hook::skips_softmax()) return;
    if (key0 + BN > ctx_len || (p.causal && key0 + BN - 1 > qpos_warp))
      OnlineSoftmax<BN>::mask(sc, key0, lane, ctx_len, p.causal, qpos_warp + lane / 4);
    sm.update(sc, p.scale_log2);
  };
  auto pack = [&] {
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      pk[ks][0] = Elem<T>::pack(sc[8 * ks + 0], sc[8 * ks + 1]);
      pk[ks][1] = Elem<T>::pack(sc[8 * ks + 2], sc[8 * ks + 3]);
      pk[ks][2] = Elem<T>::pack(sc[8 * ks + 4], sc[8 * ks + 5]);
      pk[ks][3] = Elem<T>::pack(sc[8 * ks + 6], sc[8 * ks + 7]);
    }
  };

  // Item k of the CTA (its slot in the ring) is read from shared memory when
  // needed, and its slot freed once its output is stored. Once an item's last
  // scores are done with qf, the next item is awaited and its Q asked for;
  // once the P V under them is done too (pk is free, so fewer registers are
  // live) its Q is loaded into qf.
  int k = 0;
  auto item_at = [&](int j) { return sm90_ws_load_desc(st.item_slot(j)); };
  bool more = false;  // item k + 1 exists
  auto fetch_next = [&] {
    const Sm90WsDesc w = sm90_ws_wait_item(st, k + 1);
    more = w.item < sched.n_items;
    if (!QTMA && more) prefetch_q(w);
  };
  auto load_next = [&] {
    if constexpr (Hook::keeps_first_q() || kQShared) return;  // shared: awaited before its first scores
    if (more) load_q(item_at(k + 1));
  };

  // Step t scores tile t on the tensor cores while P_{t-1} V_{t-1} follows it,
  // then runs the softmax of tile t before waiting for that product
  // (FlashAttention-3's order inside a warpgroup; ptxas moves the wait up, see
  // the head of this file). last: the item's last tile, after whose scores
  // the next item is fetched and its Q loaded.
  constexpr bool kEarlyTests = F::kEarlyTests;
  // kSplitRelease: tile g's K is released once its scores are done, its V
  // once its P V is; otherwise both at once after P V.
  constexpr bool kSplitRelease = F::kSplitRelease;
  auto release_k = [&](int g) {
    if constexpr (kSplitRelease) st.release(g, lane);
  };
  auto release_kv = [&](int g) {  // after P V
    st.release(g, lane, kSplitRelease);
  };
  auto stamp = [&](int point) { Hook::stamp(rec, point); };
  auto step = [&](int t, bool last) {
    stamp(0);
    // kSm90EarlyTests: both barriers asked at once, so the two answers'
    // latencies (90-170 cycles each in the trace) overlap; a wait only for
    // one not yet complete.
    const bool k_ready = kEarlyTests && st.test_k(tile_base + t);
    const bool v_ready = kEarlyTests && st.test_v(tile_base + t - 1);
    if (!k_ready) wait_k(tile_base + t);
    stamp(1);
    issue_scores(tile_base + t);
    stamp(2);
    sm.rescale(o);  // by tile t-1's factor, while the scores run
    stamp(3);
    if (!v_ready) wait_v(tile_base + t - 1);
    stamp(4);
    issue_pv(tile_base + t - 1, false);
    stamp(5);
    wgmma_wait<1>();  // the scores (committed first) are done; P V may still run
    wgmma_keep(sc);
    release_k(tile_base + t);
    stamp(6);
    if (last) free_q();
    if (last) fetch_next();
    softmax(t);
    wgmma_wait<0>();
    wgmma_keep(o);
    stamp(7);
    release_kv(tile_base + t - 1);
    if (last) load_next();
    pack();
    stamp(8);
    Hook::step_done(rec);
  };

  // The steps run on across items: the next item's first tile is scored
  // under the current item's last P V, so neither a Q load nor a first
  // softmax nor a last P V stands alone between items. The steps inside an
  // item are a loop of their own, with nothing in it for the item's ends.
  {
    const Sm90WsDesc w = sm90_ws_wait_item(st, 0);
    if (w.item >= sched.n_items) goto done;
    start(w);
    load_q(w);
  }
  zero_o();
  Hook::between_items(rec, true);
  wait_k(0);
  issue_scores(0);
  wgmma_wait<0>();
  wgmma_keep(sc);
  release_k(0);
  if (n_tiles == 1) {
    free_q();
    fetch_next();
    load_next();
  }
  softmax(0);  // O is zero: nothing to rescale
  pack();
  for (;;) {
    Hook::between_items(rec, false);
    for (int t = 1; t < n_tiles - 1; ++t) step(t, false);
    if (n_tiles > 1) step(n_tiles - 1, true);
    // The item's last step: its last P V, under which the next item's first
    // tile is scored and its softmax runs. Without a next item the last
    // tile's K (still held) is scored again and dropped: the wgmma sequence
    // is the same on both paths, which keeps ptxas from serialising it.
    Hook::between_items(rec, true);
    const int last = tile_base + n_tiles - 1, first_next = tile_base + item_tiles;
    for (int g = last + 1; g < first_next; ++g) {  // tiles only the other CTA computes
      wait_k(g);
      wait_v(g);
      release_k(g);
      release_kv(g);
    }
    const bool next = more;
    if (next) wait_k(first_next);
    if (kQShared && next) load_q(item_at(k + 1));
    issue_scores(next ? first_next : last);
    sm.rescale(o);
    issue_pv(last);
    const float row_max[2] = {sm.m_run[0], sm.m_run[1]};
    float row_sum[2] = {sm.row_sum(0), sm.row_sum(1)};  // final
    wgmma_wait<1>();
    wgmma_keep(sc);
    if (next) release_k(first_next);  // without one, the last K was scored again, and released before
    bool one_tile = false;
    if (next) {
      ++k;
      tile_base = first_next;
      start(item_at(k));
      sm = OnlineSoftmax<BN>{};
      one_tile = n_tiles == 1;  // then the item after is awaited once its slot is free (below)
      if (one_tile) free_q();
      softmax(0);
    }
    wgmma_wait<0>();
    wgmma_keep(o);
    release_kv(last);
    // kPackFirst: pk is free now (the last P V is done), and packing the
    // next item's first P frees half of sc's registers before the stores.
    if constexpr (F::kPackFirst) {
      if (next) pack();
    }
    const int done = next ? k - 1 : k;
    const Sm90WsDesc w_done = item_at(done);
    if (w_done.piece < 0 ||
        sm90_ws_merge_piece<F>(sched, w_done, o, row_max, row_sum, ctid, p.scale_log2, BN)) {
      const float inv[2] = {row_sum[0] > 0.f ? 1.f / row_sum[0] : 0.f, row_sum[1] > 0.f ? 1.f / row_sum[1] : 0.f};
      store_o(w_done, inv);
    }
    sm90_ws_free_item(st, done);
    if (!next) break;
    if (one_tile) {
      fetch_next();
      load_next();
    }
    zero_o();
    if constexpr (!F::kPackFirst) pack();
  }
done:
  Hook::end(rec, lane);
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
inline cudaError_t sm90_ws_launch(void (*kernel)(Params...), int grid, int cluster, int smem_bytes,
                                  cudaStream_t stream, Args... args) {
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
