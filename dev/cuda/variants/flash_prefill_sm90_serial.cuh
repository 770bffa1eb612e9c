// Lab versions v27-v29 of the Hopper prefill (production:
// flash_prefill_sm90_ws.cuh): the production producer (ISSUERS warps issuing
// copies, K and V on barriers of their own), with consumers that run each
// tile's Q K^T, softmax and P V one after another, without FlashAttention-3's
// overlap of the softmax with the previous tile's P V.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/cuda/tma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"
#include "variants/flash_prefill_sm90_lab.cuh"

namespace exactly::kernels::cuda {

template <int BN, int STAGES, int ISSUERS = Sm90WsFeatures::kIssuers>
__global__ void __launch_bounds__(384, 1)
    flash_prefill_sm90_serial_kernel(const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map,
                                 const PrefillParams p) {
#if defined(EXACTLY_HAS_WGMMA)
  using T = __nv_bfloat16;
  using F = LabFeatures<BN, STAGES, 128, 1, kSm90Exact, 16, false, 2, ISSUERS>;
  using S = Sm90WsShape<F>;
  constexpr int D = S::kD;
  extern __shared__ unsigned char smem_raw[];
  const Sm90WsStages<F> st((smem_address(smem_raw) + 1023u) & ~1023u);

  const int seq = blockIdx.z;
  const int head = blockIdx.y;
  const int q_begin = p.query_start[seq];
  const int q_len = p.query_start[seq + 1] - q_begin;
  const int m0 = (gridDim.x - 1 - blockIdx.x) * S::kBM;
  if (m0 >= q_len) return;
  const int ctx_len = p.seq_lens[seq];
  const int prefix = ctx_len - q_len;
  const int kv_head = head / p.group;
  const int n_keys = p.causal ? min(ctx_len, prefix + min(q_len, m0 + S::kBM)) : ctx_len;
  const int n_tiles = (n_keys + BN - 1) / BN;
  const int tid = threadIdx.x;

  if (tid == 0) st.init_barriers();
  __syncthreads();

  if (tid < 128) {  // producer warpgroup
    setmaxnreg_dec<40>();
    Sm90WsProducer<F>(st, &k_map, &v_map, nullptr, p).load_kv(seq, kv_head, n_keys, n_tiles, tid);
    return;
  }

  setmaxnreg_inc<232>();
  const int ctid = tid - 128;
  const int lane = ctid % 32;
  const int warp_row0 = (ctid / 32) * 16;
  const int64_t token_stride = int64_t{p.n_heads} * D;
  const T* q = static_cast<const T*>(p.q);

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
  OnlineSoftmax<BN> softmax;
  const int qpos0 = prefix + m0 + warp_row0 + lane / 4;

  for (int t = 0; t < n_tiles; ++t) {
    st.wait_k(t);
    const uint32_t k_tile = st.k_tile(t);
    const uint32_t v_tile = st.v_tile(t);

    float sc[BN / 2];
    wgmma_keep(sc);  // operand fences: nothing defining them moves in among the products
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint64_t desc = wgmma_descriptor(k_tile + (ks / 4) * S::kPanelBytes + (ks % 4) * 32, S::kPanelBytes, 1024);
      if constexpr (BN == 64) {
        wgmma_m64n64k16_rs<0>(sc, qf[ks], desc, ks > 0);
      } else {
        wgmma_m64n128k16_rs<0>(sc, qf[ks], desc, ks > 0);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_keep(sc);

    const int key0 = t * BN;
    if (key0 + BN > ctx_len || (p.causal && key0 + BN - 1 > prefix + m0 + warp_row0))
      OnlineSoftmax<BN>::mask(sc, key0, lane, ctx_len, p.causal, qpos0);
    softmax.update(sc, p.scale_log2);
    softmax.rescale(o);
    uint32_t pa[BN / 16][4];  // P packed for the product before it starts
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      pa[ks][0] = Elem<T>::pack(sc[8 * ks + 0], sc[8 * ks + 1]);
      pa[ks][1] = Elem<T>::pack(sc[8 * ks + 2], sc[8 * ks + 3]);
      pa[ks][2] = Elem<T>::pack(sc[8 * ks + 4], sc[8 * ks + 5]);
      pa[ks][3] = Elem<T>::pack(sc[8 * ks + 6], sc[8 * ks + 7]);
    }

    st.wait_v(t);
    wgmma_keep(o);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks)
      wgmma_m64n128k16_rs<1>(o, pa[ks], wgmma_descriptor(v_tile + ks * 16 * 128, S::kPanelBytes, 1024), 1);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_keep(o);
    st.release(t, lane);
  }

  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float inv = softmax.inverse_sum(r);
    const int row = m0 + warp_row0 + lane / 4 + 8 * r;
    if (row >= q_len) continue;
    uint32_t* dst = reinterpret_cast<uint32_t*>(out + (q_begin + row) * token_stride + head * D + (lane % 4) * 2);
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) dst[dt * 4] = Elem<T>::pack(o[4 * dt + 2 * r] * inv, o[4 * dt + 2 * r + 1] * inv);
  }
#endif
}

}  // namespace exactly::kernels::cuda
