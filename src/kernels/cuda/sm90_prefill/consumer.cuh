// The consumer warpgroups of the Hopper prefill kernel: each holds 64 query
// rows of the CTA's item in registers (Q unless F::kQShared, the scores S,
// the probabilities P, the output O) and runs the wgmma products and the
// online softmax (online_softmax.cuh) over the item's K/V tiles as the
// producer lands them, releasing each stage when done with it.
//
// Step t scores tile t on the tensor cores while P_{t-1} V_{t-1} follows it,
// then runs the softmax of tile t before waiting for that product
// (FlashAttention-3's order inside a warpgroup; ptxas hoists the wait above
// the softmax, so in practice the consumer warpgroups overlap each other's
// softmax with their products). The steps run on across items: the next
// item's first tile is scored, and its softmax run, under the current item's
// last P V, so neither a Q load nor a first softmax nor a last P V stands
// alone between items. The steps inside an item are a loop of their own,
// with nothing in it for the item's ends. No consumer thread computes a K/V
// address or waits at a CTA-wide barrier.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/cuda/sm90_prefill/features.cuh"
#include "kernels/cuda/sm90_prefill/hook.cuh"
#include "kernels/cuda/sm90_prefill/stages.cuh"
#include "kernels/cuda/sm90_prefill/tile_scheduler.cuh"
#include "kernels/cuda/tma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"

namespace exactly::kernels::cuda {

// The current item as a consumer thread walks it: its tiles are the CTA's
// tile_base, tile_base + 1, ...: its own n_tiles, then any the other CTA of
// the cluster needs beyond them, item_tiles in all. key_tile0: its first key
// tile (a piece of a split item starts past 0; split items have no mask, so
// both CTAs of a cluster compute all of the piece's tiles); ctx_len: its
// keys; qpos_warp: the position of the warp's first query row.
struct Sm90WsItemTiles {
  int tile_base = 0, n_tiles = 0, item_tiles = 0, key_tile0 = 0, ctx_len = 0, qpos_warp = 0;
};

// wgmma exists only in sm_90a device code.
#if defined(EXACTLY_HAS_WGMMA)
// A consumer thread's registers (State) and its current item's tiles are
// objects of the kernel's, which the members below work on; the epilogue
// reads O from the state. They are kept apart from the consumer's references
// (and the tile scheduler is held by value): folded into one object, the
// same code comes out of ptxas with other register assignments.
template <class F, class Hook = Sm90WsNoHook>
class Sm90WsConsumer {
 public:
  using T = __nv_bfloat16;
  using S = Sm90WsShape<F>;
  static constexpr int BN = F::kTileKeys, D = F::kHeadDim;
  static_assert(!F::kQShared || !Hook::keeps_first_q(), "Q in shared memory, copied there per item");

  // What a consumer thread keeps in registers: its share of the item's Q
  // (without F::kQShared), the scores S (then P), P packed for P V, the
  // output O, the online softmax of its two rows, and where it is in the
  // CTA's items.
  struct State {
    uint32_t qf[D / 16][4];
    int q_loads = 0;  // items whose Q came from shared memory (F::kQByTma), for the phase
    float o[D / 2];   // O, unnormalised (the accumulator layout)
    float sc[BN / 2];
    uint32_t pk[BN / 16][4];
    OnlineSoftmax<BN> sm;
    int k = 0;          // the current item (its slot in the ring)
    bool more = false;  // item k + 1 exists
  };

  // ctid: the thread's index among the consumers; rec: its record for the
  // hook (kept apart, since a hook may index it at run time).
  __device__ __forceinline__ Sm90WsConsumer(const Sm90WsStages<F>& st, const PrefillParams& p,
                                            const Sm90WsTileScheduler<F>& items, State& state,
                                            typename Hook::Record& rec, int ctid)
      : st_(st), p_(p), items_(items), state_(state), rec_(rec), ctid_(ctid) {
    Hook::begin(rec_, ctid);
  }

  // The CTA's first item w: its Q loaded, its first tile scored and its
  // softmax run (O is zero: nothing to rescale).
  __device__ __forceinline__ void first_item(Sm90WsItemTiles& tiles, const Sm90WsDesc& w) {
    start(tiles, w);
    load_q(w);
    zero_o();
    Hook::between_items(rec_, true);
    wait_k(0);
    issue_scores(0);
    wgmma_wait<0>();
    wgmma_keep(state_.sc);
    release_k(0);
    if (tiles.n_tiles == 1) {
      free_q();
      fetch_next();
      load_next();
    }
    softmax(tiles, 0);
    pack();
  }

  // The current item's steps after its first tile.
  __device__ __forceinline__ void item_steps(Sm90WsItemTiles& tiles) {
    Hook::between_items(rec_, false);
    for (int t = 1; t < tiles.n_tiles - 1; ++t) step(tiles, t, false);
    if (tiles.n_tiles > 1) step(tiles, tiles.n_tiles - 1, true);
  }

  // The current item's last step: its last P V, under which the next item's
  // first tile is scored and its softmax runs. Without a next item the last
  // tile's K (still held) is scored again and dropped: the wgmma sequence is
  // the same on both paths, which keeps ptxas from serialising it. Leaves the
  // item's output in the state's o and its rows' raw maxima and sums in
  // row_max and row_sum; returns whether there is a next item (then the
  // current one, with one_tile: whether it has a single tile).
  __device__ __forceinline__ bool last_step(Sm90WsItemTiles& tiles, float (&row_max)[2], float (&row_sum)[2],
                                            bool& one_tile) {
    Hook::between_items(rec_, true);
    const int last = tiles.tile_base + tiles.n_tiles - 1, first_next = tiles.tile_base + tiles.item_tiles;
    for (int g = last + 1; g < first_next; ++g) {  // tiles only the other CTA computes
      wait_k(g);
      wait_v(g);
      release_k(g);
      release_kv(g);
    }
    const bool next = state_.more;
    if (next) wait_k(first_next);
    if (F::kQShared && next) load_q(items_.at(state_.k + 1));
    issue_scores(next ? first_next : last);
    state_.sm.rescale(state_.o);
    issue_pv(last);
    row_max[0] = state_.sm.m_run[0];
    row_max[1] = state_.sm.m_run[1];
    row_sum[0] = state_.sm.row_sum(0);
    row_sum[1] = state_.sm.row_sum(1);
    wgmma_wait<1>();
    wgmma_keep(state_.sc);
    if (next) release_k(first_next);  // without one, the last K was scored again, and released before
    one_tile = false;
    if (next) {
      ++state_.k;
      tiles.tile_base = first_next;
      start(tiles, items_.at(state_.k));
      state_.sm = OnlineSoftmax<BN>{};
      one_tile = tiles.n_tiles == 1;  // then the item after it is awaited in next_item
      if (one_tile) free_q();
      softmax(tiles, 0);
    }
    wgmma_wait<0>();
    wgmma_keep(state_.o);
    release_kv(last);
    // F::kPackFirst: pk is free now (the last P V is done), and packing the
    // next item's first P frees half of sc's registers before the stores.
    if constexpr (F::kPackFirst) {
      if (next) pack();
    }
    return next;
  }

  // On into the next item, once the one before is stored (a next item of
  // one tile awaits the item after it here, once its slot is free).
  __device__ __forceinline__ void next_item(Sm90WsItemTiles& tiles, bool one_tile) {
    if (one_tile) {
      fetch_next();
      load_next();
    }
    zero_o();
    if constexpr (!F::kPackFirst) pack();
  }

  // After the CTA's last item.
  __device__ __forceinline__ void end() { Hook::end(rec_, lane_); }

  // The scores of the CTA's tile g (its stage in the ring) into sc.
  __device__ void issue_scores(int g) {
    const uint64_t k_desc = wgmma_descriptor(st_.k_tile(g), S::kPanelBytes, 1024);
    wgmma_keep(state_.sc);
    wgmma_fence();
    if constexpr (F::kQShared) {  // this warpgroup's 64 rows of each Q panel
      const uint64_t q_desc = wgmma_descriptor(st_.q + (ctid_ / 128) * 64 * 128, S::kQPanelBytes, 1024);
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const uint64_t desc = wgmma_descriptor_advance(k_desc, (ks / 4) * S::kPanelBytes + (ks % 4) * 32);
        const uint64_t a = wgmma_descriptor_advance(q_desc, (ks / 4) * S::kQPanelBytes + (ks % 4) * 32);
        if constexpr (BN == 64) {
          wgmma_m64n64k16_ss<0>(state_.sc, a, desc, ks > 0);
        } else {
          wgmma_m64n128k16_ss<0>(state_.sc, a, desc, ks > 0);
        }
      }
    } else {
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const uint64_t desc = wgmma_descriptor_advance(k_desc, (ks / 4) * S::kPanelBytes + (ks % 4) * 32);
        if constexpr (BN == 64) {
          wgmma_m64n64k16_rs<0>(state_.sc, state_.qf[ks], desc, ks > 0);
        } else {
          wgmma_m64n128k16_rs<0>(state_.sc, state_.qf[ks], desc, ks > 0);
        }
      }
    }
    wgmma_commit();
    wgmma_keep(state_.sc);
  }

  // O += P V of the CTA's tile g (waiting for its V unless told not to).
  __device__ void issue_pv(int g, bool wait = true) {
    if (wait) wait_v(g);
    const uint64_t v_desc = wgmma_descriptor(st_.v_tile(g), S::kPanelBytes, 1024);
    wgmma_keep(state_.o);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      const uint64_t desc = wgmma_descriptor_advance(v_desc, ks * 16 * 128);
      if constexpr (D == 64) {
        wgmma_m64n64k16_rs<1>(state_.o, state_.pk[ks], desc, 1);
      } else {
        wgmma_m64n128k16_rs<1>(state_.o, state_.pk[ks], desc, 1);
      }
    }
    wgmma_commit();
    wgmma_keep(state_.o);
  }

  // The online softmax of the current item's tile t (scores in sc, in
  // place); leaves in sm.correction the factor by which O must be rescaled
  // before P_t V_t.
  __device__ void softmax(const Sm90WsItemTiles& tiles, int t) {
    const int key0 = (tiles.key_tile0 + t) * BN;
    if constexpr (Hook::skips_softmax()) return;
    if (key0 + BN > tiles.ctx_len || (p_.causal && key0 + BN - 1 > tiles.qpos_warp))
      OnlineSoftmax<BN>::mask(state_.sc, key0, lane_, tiles.ctx_len, p_.causal, tiles.qpos_warp + lane_ / 4);
    state_.sm.update(state_.sc, p_.scale_log2);
  }

  // P (sc) packed into bf16 pairs, the A operand of P V.
  __device__ void pack() {
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      state_.pk[ks][0] = Elem<T>::pack(state_.sc[8 * ks + 0], state_.sc[8 * ks + 1]);
      state_.pk[ks][1] = Elem<T>::pack(state_.sc[8 * ks + 2], state_.sc[8 * ks + 3]);
      state_.pk[ks][2] = Elem<T>::pack(state_.sc[8 * ks + 4], state_.sc[8 * ks + 5]);
      state_.pk[ks][3] = Elem<T>::pack(state_.sc[8 * ks + 6], state_.sc[8 * ks + 7]);
    }
  }

 private:
  // Step t of the current item (t > 0); last: the item's last tile, after
  // whose scores the next item is fetched and its Q loaded.
  __device__ void step(Sm90WsItemTiles& tiles, int t, bool last) {
    stamp(0);
    // F::kEarlyTests: both barriers asked at once, so the two answers'
    // latencies overlap; a wait only for one not yet complete.
    const bool k_ready = F::kEarlyTests && st_.test_k(tiles.tile_base + t);
    const bool v_ready = F::kEarlyTests && st_.test_v(tiles.tile_base + t - 1);
    if (!k_ready) wait_k(tiles.tile_base + t);
    stamp(1);
    issue_scores(tiles.tile_base + t);
    stamp(2);
    state_.sm.rescale(state_.o);  // by tile t-1's factor, while the scores run
    stamp(3);
    if (!v_ready) wait_v(tiles.tile_base + t - 1);
    stamp(4);
    issue_pv(tiles.tile_base + t - 1, false);
    stamp(5);
    wgmma_wait<1>();  // the scores (committed first) are done; P V may still run
    wgmma_keep(state_.sc);
    release_k(tiles.tile_base + t);
    stamp(6);
    if (last) free_q();
    if (last) fetch_next();
    softmax(tiles, t);
    wgmma_wait<0>();
    wgmma_keep(state_.o);
    stamp(7);
    release_kv(tiles.tile_base + t - 1);
    if (last) load_next();
    pack();
    stamp(8);
    Hook::step_done(rec_);
  }

  // The tiles of item w.
  __device__ void start(Sm90WsItemTiles& tiles, const Sm90WsDesc& w) {
    tiles.key_tile0 = w.tile0;
    tiles.n_tiles = min((w.n_keys + BN - 1) / BN, w.tile_end) - w.tile0;
    tiles.item_tiles = w.tile_end - w.tile0;
    tiles.ctx_len = w.ctx_len;
    tiles.qpos_warp = w.ctx_len - w.q_len + w.m0 + warp_row0_;
  }

  // Item k + 1, once the current item's last scores are done with qf: it is
  // awaited and its Q asked for; once the P V under them is done too (pk is
  // free, so fewer registers are live) its Q is loaded into qf.
  __device__ void fetch_next() {
    const Sm90WsDesc w = items_.wait(state_.k + 1);
    state_.more = items_.valid(w);
    if (!F::kQByTma && state_.more) prefetch_q(w);
  }
  __device__ void load_next() {
    if constexpr (Hook::keeps_first_q() || F::kQShared) return;  // shared: awaited before its first scores
    if (state_.more) load_q(items_.at(state_.k + 1));
  }

  // With F::kQShared the scores read Q straight from shared memory (as
  // cuDNN's and FlashAttention-3's kernels do): no registers hold it, and its
  // buffer is the item's until the item's last scores are done (free_q).
  __device__ void free_q() {
    if constexpr (F::kQShared) mbarrier_arrive(st_.q_empty);
  }
  __device__ void load_q(const Sm90WsDesc& w) {
    if constexpr (F::kQShared) {
      mbarrier_wait(st_.q_full, state_.q_loads & 1);
      ++state_.q_loads;
      return;
    }
    if constexpr (F::kQByTma) {
      // ldmatrix: lanes 8m..8m+7 address matrix m of each 16 x 16 slice
      // (rows 0-7 / 8-15 by m % 2, columns 0-7 / 8-15 by m / 2), which lands
      // as the wgmma A fragment; the rows are 128-byte swizzled as TMA wrote
      // them. Rows past the query hold other tokens' queries or zeros: their
      // scores are finite, and their output is never stored.
      mbarrier_wait(st_.q_full, state_.q_loads & 1);
      const int m = lane_ / 8, row = warp_row0_ + (m % 2) * 8 + lane_ % 8;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const int chunk = (ks % 4) * 2 + m / 2;
        ldmatrix_x4(state_.qf[ks], st_.q + (ks / 4) * S::kQPanelBytes + row * 128 + ((chunk ^ (row % 8)) << 4));
      }
      mbarrier_arrive(st_.q_empty);
      ++state_.q_loads;
      return;
    }
    const int r0 = w.m0 + warp_row0_ + lane_ / 4;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = r0 + (i % 2) * 8;
        const int col = ks * 16 + (lane_ % 4) * 2 + (i / 2) * 8;
        state_.qf[ks][i] =
            row < w.q_len
                ? *reinterpret_cast<const uint32_t*>(q_ + (w.q_begin + row) * token_stride_ + w.head * D + col)
                : 0u;
      }
  }
  // Each lane asks for one 128-byte line of its warp's 16 rows of the item's
  // Q (two lines per row at head dim 128), so load_q later finds them near.
  __device__ void prefetch_q(const Sm90WsDesc& w) {
    constexpr int kLines = D * 2 / 128;
    const int row = w.m0 + warp_row0_ + lane_ / kLines;
    if (lane_ < 16 * kLines && row < w.q_len)
      asm volatile("prefetch.global.L1 [%0];" ::"l"(q_ + (w.q_begin + row) * token_stride_ + w.head * D +
                                                    (lane_ % kLines) * 64));
  }

  __device__ void zero_o() {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) state_.o[i] = 0.f;
  }

  // F::kSplitRelease: tile g's K is released once its scores are done, its
  // V once its P V is; otherwise both at once after P V.
  __device__ void release_k(int g) {
    if constexpr (F::kSplitRelease) st_.release(g, lane_);
  }
  __device__ void release_kv(int g) { st_.release(g, lane_, F::kSplitRelease); }

  __device__ void wait_k(int g) {
    Hook::wait(rec_, false, [&] { st_.wait_k(g); });
  }
  __device__ void wait_v(int g) {
    Hook::wait(rec_, true, [&] { st_.wait_v(g); });
  }
  __device__ void stamp(int point) { Hook::stamp(rec_, point); }

  const Sm90WsStages<F>& st_;
  const PrefillParams& p_;
  const Sm90WsTileScheduler<F> items_;  // a copy: references and indices
  State& state_;
  typename Hook::Record& rec_;
  const int ctid_, lane_ = ctid_ % 32, warp_row0_ = (ctid_ / 32) * 16;
  const int64_t token_stride_ = int64_t{p_.n_heads} * D;
  const T* const q_ = static_cast<const T*>(p_.q);
};
#endif  // EXACTLY_HAS_WGMMA

}  // namespace exactly::kernels::cuda
