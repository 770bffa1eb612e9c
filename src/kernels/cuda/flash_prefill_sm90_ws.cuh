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
#include "kernels/cuda/sm90_prefill/epilogue.cuh"
#include "kernels/cuda/sm90_prefill/features.cuh"
#include "kernels/cuda/sm90_prefill/hook.cuh"
#include "kernels/cuda/sm90_prefill/producer.cuh"
#include "kernels/cuda/sm90_prefill/stages.cuh"
#include "kernels/cuda/sm90_prefill/tile_scheduler.cuh"
#include "kernels/cuda/tma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"

namespace exactly::kernels::cuda {

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
  const Sm90WsTileScheduler<F> items(st, sched, p);
  const Sm90WsEpilogue<F, Hook> epilogue(p, sched, ctid);
  auto item_at = [&](int j) { return items.at(j); };
  bool more = false;  // item k + 1 exists
  auto fetch_next = [&] {
    const Sm90WsDesc w = items.wait(k + 1);
    more = items.valid(w);
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
    const Sm90WsDesc w = items.wait(0);
    if (!items.valid(w)) goto done;
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
    if (w_done.piece < 0 || epilogue.merge_pieces(w_done, o, row_max, row_sum)) {
      const float inv[2] = {row_sum[0] > 0.f ? 1.f / row_sum[0] : 0.f, row_sum[1] > 0.f ? 1.f / row_sum[1] : 0.f};
      epilogue.store(w_done, o, inv);
    }
    items.free(done);
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
