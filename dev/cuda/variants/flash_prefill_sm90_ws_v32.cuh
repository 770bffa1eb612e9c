// Lab version v32 of the Hopper prefill (production: flash_prefill_sm90_ws.cuh),
// kept as its consumers were before work items were pipelined into one
// another (v40): each item starts afresh, loading its Q from global memory,
// scoring its first tile and running that tile's softmax with nothing under
// them, and running its last P V with nothing under it. The producer is
// production's; these consumers read only an item's index from its slot and
// look up the rest themselves, as they did (in the lab 0-1% slower than on
// the producer they had).
#pragma once

#include <cstdint>

#include "variants/flash_prefill_sm90_lab.cuh"

namespace exactly::kernels::cuda {

// An item's index, its slot freed at once (these consumers look up the rest).
template <class F>
__device__ __forceinline__ int sm90_ws_receive_item(const Sm90WsTileScheduler<F>& items, int k) {
  const int item = items.wait(k).item;
  items.free(k);
  return item;
}

template <int BN, int STAGES, int D = 128>
__global__ void __launch_bounds__(384, 1)
    flash_prefill_sm90_ws_v32_kernel(const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map,
                                     const __grid_constant__ CUtensorMap /*q_map: unused*/, const PrefillParams p,
                                     const Sm90WsSchedule sched) {
#if defined(EXACTLY_HAS_WGMMA)
  using T = __nv_bfloat16;
  using F = LabFeatures<BN, STAGES, D>;
  using S = Sm90WsShape<F>;
  static_assert(S::kBM == 128, "the producer's query blocks");
  extern __shared__ unsigned char smem_raw[];
  const Sm90WsStages<F> st((smem_address(smem_raw) + 1023u) & ~1023u);
  const int tid = threadIdx.x;

  if (tid == 0) st.init_barriers();
  __syncthreads();

  if (tid < 128) {  // producer warpgroup
    setmaxnreg_dec<40>();
    Sm90WsProducer<F>(st, &k_map, &v_map, &k_map, p).run(sched, tid);  // no Q copies
    return;
  }

  setmaxnreg_inc<232>();
  const int ctid = tid - 128;
  const int lane = ctid % 32;
  const int warp_row0 = (ctid / 32) * 16;
  const int64_t token_stride = int64_t{p.n_heads} * D;
  const T* q = static_cast<const T*>(p.q);
  T* out = static_cast<T*>(p.out);

  const Sm90WsTileScheduler<F> items(st, sched, p);
  int tile_base = 0;
  for (int k = 0;; ++k) {
    const int item = sm90_ws_receive_item(items, k);
    if (item >= sched.n_items) break;
    const Sm90WsDesc w = sm90_ws_describe(item, sched, p, S::kBM);
    const int head = w.head, m0 = w.m0, q_begin = w.q_begin, q_len = w.q_len;
    if (m0 >= q_len) continue;
    const int ctx_len = w.ctx_len;
    const int prefix = ctx_len - q_len;
    const int n_tiles = (w.n_keys + BN - 1) / BN;

    uint32_t qf[D / 16][4];
    {
      const int r0 = m0 + warp_row0 + lane / 4;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = r0 + (i % 2) * 8;
          const int col = ks * 16 + (lane % 4) * 2 + (i / 2) * 8;
          qf[ks][i] = row < q_len ? *reinterpret_cast<const uint32_t*>(q + (q_begin + row) * token_stride +
                                                                        head * D + col)
                                  : 0u;
        }
    }
    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    const int qpos0 = prefix + m0 + warp_row0 + lane / 4;

    float sc[BN / 2];
    uint32_t pk[BN / 16][4];

    // t: the item's own tile index; g = tile_base + t: the CTA's, for stages.
    auto issue_scores = [&](int t) {
      const uint32_t k_tile = st.k_tile(tile_base + t);
      wgmma_keep(sc);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        const uint64_t desc =
            wgmma_descriptor(k_tile + (ks / 4) * S::kPanelBytes + (ks % 4) * 32, S::kPanelBytes, 1024);
        if constexpr (BN == 64) {
          wgmma_m64n64k16_rs<0>(sc, qf[ks], desc, ks > 0);
        } else {
          wgmma_m64n128k16_rs<0>(sc, qf[ks], desc, ks > 0);
        }
      }
      wgmma_commit();
      wgmma_keep(sc);
    };
    auto issue_pv = [&](int t) {
      st.wait_v(tile_base + t);
      const uint32_t v_tile = st.v_tile(tile_base + t);
      wgmma_keep(o);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < BN / 16; ++ks) {
        const uint64_t desc = wgmma_descriptor(v_tile + ks * 16 * 128, S::kPanelBytes, 1024);
        if constexpr (D == 64) {
          wgmma_m64n64k16_rs<1>(o, pk[ks], desc, 1);
        } else {
          wgmma_m64n128k16_rs<1>(o, pk[ks], desc, 1);
        }
      }
      wgmma_commit();
      wgmma_keep(o);
    };
    // The online softmax of tile t's scores (in sc, in place); leaves in
    // sm.correction the factor by which O must be rescaled before P_t V_t.
    OnlineSoftmax<BN> sm;
    auto softmax = [&](int t) {
      const int key0 = t * BN;
      if (key0 + BN > ctx_len || (p.causal && key0 + BN - 1 > prefix + m0 + warp_row0))
        OnlineSoftmax<BN>::mask(sc, key0, lane, ctx_len, p.causal, qpos0);
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
    auto rescale = [&] { sm.rescale(o); };

    // Tile 0 alone; then each step scores tile t on the tensor cores while
    // P_{t-1} V_{t-1} follows it, and the softmax of tile t runs under that
    // product (FlashAttention-3's overlap inside a warpgroup).
    st.wait_k(tile_base);
    issue_scores(0);
    wgmma_wait<0>();
    wgmma_keep(sc);
    softmax(0);  // O is zero: nothing to rescale
    pack();
    for (int t = 1; t < n_tiles; ++t) {
      st.wait_k(tile_base + t);
      issue_scores(t);
      rescale();  // by tile t-1's factor, while the scores run
      issue_pv(t - 1);
      wgmma_wait<1>();  // the scores (committed first) are done; P V may still run
      wgmma_keep(sc);
      softmax(t);
      wgmma_wait<0>();
      wgmma_keep(o);
      st.release(tile_base + t - 1, lane);
      pack();
    }
    rescale();
    issue_pv(n_tiles - 1);
    wgmma_wait<0>();
    wgmma_keep(o);
    st.release(tile_base + n_tiles - 1, lane);
    tile_base += n_tiles;

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float inv = sm.inverse_sum(r);
      const int row = m0 + warp_row0 + lane / 4 + 8 * r;
      if (row >= q_len) continue;
      uint32_t* dst =
          reinterpret_cast<uint32_t*>(out + (q_begin + row) * token_stride + head * D + (lane % 4) * 2);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        dst[dt * 4] = Elem<T>::pack(o[4 * dt + 2 * r] * inv, o[4 * dt + 2 * r + 1] * inv);
    }
  }
#endif
}

}  // namespace exactly::kernels::cuda
