// Lab version v12 of the Hopper prefill (production: flash_prefill_sm90_ws.cuh),
// kept as it was before the softmax was made lean (v20): the same producer
// and consumers, with exp2f (a range check and two multiplies around each
// MUFU.EX2 without fast math) and the mask evaluated per element with
// short-circuit logic, which ptxas compiles to a branch per score.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/tma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"
#include "variants/flash_prefill_sm90_lab.cuh"

namespace exactly::kernels::cuda {

template <int BN, int STAGES>
__global__ void __launch_bounds__(384, 1)
    flash_prefill_sm90_ws_v12_kernel(const __grid_constant__ CUtensorMap k_map, const __grid_constant__ CUtensorMap v_map,
                                 const PrefillParams p) {
#if defined(EXACTLY_HAS_WGMMA)
  using T = __nv_bfloat16;
  using S = Sm90WsShape<LabFeatures<BN, STAGES>>;
  constexpr int D = S::kD;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_address(smem_raw) + 1023u) & ~1023u;
  const uint32_t k_smem = base;
  const uint32_t v_smem = base + STAGES * S::kTileBytes;
  const uint32_t full_bar = v_smem + STAGES * S::kTileBytes;  // STAGES barriers of 8 bytes
  const uint32_t empty_bar = full_bar + STAGES * 8;

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

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(full_bar + 8 * s, 1);    // the producer's arrive, plus the copies' bytes
      mbarrier_init(empty_bar + 8 * s, 8);   // one arrive per consumer warp
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  if (tid < 128) {  // producer warpgroup
    setmaxnreg_dec<40>();
    if (tid == 0) {
      const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;
      for (int t = 0; t < n_tiles; ++t) {
        const int s = t % STAGES;
        mbarrier_wait(empty_bar + 8 * s, ((t / STAGES) & 1) ^ 1);
        mbarrier_arrive_expect_tx(full_bar + 8 * s, 2 * S::kTileBytes);
#pragma unroll 1
        for (int g = 0; g < BN / 16; ++g) {
          int key0 = t * BN + g * 16;
          if (key0 >= n_keys) key0 = 0;  // a whole 16-key group past the end: any finite block, masked
          const int slot0 = table[key0 / p.block_size] * p.block_size + key0 % p.block_size;
          for (int panel = 0; panel < 2; ++panel) {
            const uint32_t dst = s * S::kTileBytes + panel * S::kPanelBytes + g * 16 * 128;
            tma_load_3d(k_smem + dst, &k_map, panel * 64, kv_head, slot0, full_bar + 8 * s);
            tma_load_3d(v_smem + dst, &v_map, panel * 64, kv_head, slot0, full_bar + 8 * s);
          }
        }
      }
    }
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
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  const int qpos0 = prefix + m0 + warp_row0 + lane / 4;

  for (int t = 0; t < n_tiles; ++t) {
    const int s = t % STAGES;
    mbarrier_wait(full_bar + 8 * s, (t / STAGES) & 1);
    const uint32_t k_tile = k_smem + s * S::kTileBytes;
    const uint32_t v_tile = v_smem + s * S::kTileBytes;

    float sc[BN / 2];
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
    const bool edge = key0 + BN > ctx_len || (p.causal && key0 + BN - 1 > prefix + m0 + warp_row0);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
      const int key = key0 + (i / 4) * 8 + (lane % 4) * 2 + (i & 1);
      const bool masked = edge && (key >= ctx_len || (p.causal && key > qpos0 + 8 * ((i % 4) / 2)));
      sc[i] = masked ? -INFINITY : sc[i] * p.scale_log2;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m_run[r];
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * r], sc[4 * j + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base_m = mx == -INFINITY ? 0.f : mx;
      const float correction = exp2f(m_run[r] - base_m);
      m_run[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        sc[4 * j + 2 * r] = exp2f(sc[4 * j + 2 * r] - base_m);
        sc[4 * j + 2 * r + 1] = exp2f(sc[4 * j + 2 * r + 1] - base_m);
        sum += sc[4 * j + 2 * r] + sc[4 * j + 2 * r + 1];
      }
      l_run[r] = l_run[r] * correction + sum;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        o[4 * j + 2 * r] *= correction;
        o[4 * j + 2 * r + 1] *= correction;
      }
    }

    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      const uint32_t pa[4] = {Elem<T>::pack(sc[8 * ks + 0], sc[8 * ks + 1]), Elem<T>::pack(sc[8 * ks + 2], sc[8 * ks + 3]),
                              Elem<T>::pack(sc[8 * ks + 4], sc[8 * ks + 5]), Elem<T>::pack(sc[8 * ks + 6], sc[8 * ks + 7])};
      wgmma_m64n128k16_rs<1>(o, pa, wgmma_descriptor(v_tile + ks * 16 * 128, S::kPanelBytes, 1024), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_keep(o);
    __syncwarp();
    if (lane == 0) mbarrier_arrive(empty_bar + 8 * s);  // this warp is done with the stage
  }

  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int row = m0 + warp_row0 + lane / 4 + 8 * r;
    if (row >= q_len) continue;
    uint32_t* dst = reinterpret_cast<uint32_t*>(out + (q_begin + row) * token_stride + head * D + (lane % 4) * 2);
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) dst[dt * 4] = Elem<T>::pack(o[4 * dt + 2 * r] * inv, o[4 * dt + 2 * r + 1] * inv);
  }
#endif
}

}  // namespace exactly::kernels::cuda
