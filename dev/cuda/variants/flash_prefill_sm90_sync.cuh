// FlashAttention prefill for Hopper (sm_90a): the same tiling and online
// softmax as flash_prefill_kernel.cuh, with the two matrix products on the
// warpgroup units (wgmma) instead of mma.sync. Two warpgroups of 64 query
// rows share each K/V tile; Q and P are A operands in registers, K and V are
// read by the tensor cores straight from shared memory (128-byte swizzled
// panels, see wgmma_primitives.cuh), so no ldmatrix traffic competes with
// the products. K/V tiles are double-buffered by cp.async through the block
// table. bf16, head dim 128.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"

namespace exactly::kernels::cuda {

template <int BN, int WG = 2>
struct Sm90PrefillShape {
  static constexpr int kD = 128;
  static constexpr int kWarpgroups = WG;
  static constexpr int kBM = 64 * kWarpgroups;
  static constexpr int kThreads = 128 * kWarpgroups;
  static constexpr int kPanelBytes = BN * 128;  // BN rows of 64 elements
  static constexpr int kTileBytes = 2 * kPanelBytes;
  static constexpr int kStages = 2;
  static constexpr int kSmemBytes = 2 * kStages * kTileBytes + 1024;  // + room to align to 1024
  static_assert(BN == 64 || BN == 128, "wgmma N of the score product");
};

template <int BN, int WG = 2>
__global__ void __launch_bounds__(128 * WG) flash_prefill_sm90_kernel(const PrefillParams p) {
#if defined(EXACTLY_HAS_WGMMA)
  using T = __nv_bfloat16;
  using S = Sm90PrefillShape<BN, WG>;
  constexpr int D = S::kD;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_address(smem_raw) + 1023u) & ~1023u;
  const uint32_t k_smem = base;
  const uint32_t v_smem = base + S::kStages * S::kTileBytes;

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
  const int lane = tid % 32;
  const int warp_row0 = (tid / 32) * 16;  // warpgroup w's warps hold rows 64w..64w+63
  const int64_t token_stride = int64_t{p.n_heads} * D;
  const T* q = static_cast<const T*>(p.q);
  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
  const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;

  auto load_kv = [&](int tile, int stage) {
    for (int i = tid; i < BN * 16; i += S::kThreads) {
      const int row = i / 16, chunk = i % 16;
      const int key = tile * BN + row;
      const bool valid = key < n_keys;
      const int64_t slot = valid ? int64_t{table[key / p.block_size]} * p.block_size + key % p.block_size : 0;
      const int64_t offset = (slot * p.n_kv_heads + kv_head) * D + chunk * 8;
      const uint32_t dst = stage * S::kTileBytes + (chunk / 8) * S::kPanelBytes + swizzled(row, chunk % 8, 128);
      cp_async_16(k_smem + dst, kc + offset, valid);
      cp_async_16(v_smem + dst, vc + offset, valid);
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  // Q straight into A fragments: rows g and g+8 of this warp, columns 2c, 2c+8.
  uint32_t qf[D / 16][4];
  {
    const int r0 = m0 + warp_row0 + lane / 4;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = r0 + (i % 2) * 8;
        const int col = ks * 16 + (lane % 4) * 2 + (i / 2) * 8;
        qf[ks][i] = row < q_len ? *reinterpret_cast<const uint32_t*>(q + (q_begin + row) * token_stride +
                                                                      head * D + col)
                                : 0u;
      }
    }
  }

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};
  const int qpos0 = prefix + m0 + warp_row0 + lane / 4;

  for (int t = 0; t < n_tiles; ++t) {
    const int stage = t & 1;
    if (t + 1 < n_tiles) load_kv(t + 1, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    fence_proxy_async();  // cp.async wrote through the generic proxy; wgmma reads through the async one
    __syncthreads();

    float s[BN / 8][4];
    float(&s_flat)[BN / 2] = reinterpret_cast<float(&)[BN / 2]>(s);
    const uint32_t k_tile = k_smem + stage * S::kTileBytes;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      // K is the "K-major" B operand: rows are keys, 8-row atoms 1024 bytes apart.
      const uint64_t desc = wgmma_descriptor(k_tile + (ks / 4) * S::kPanelBytes + (ks % 4) * 32, S::kPanelBytes, 1024);
      if constexpr (BN == 64) {
        wgmma_m64n64k16_rs<0>(s_flat, qf[ks], desc, ks > 0);
      } else {
        wgmma_m64n128k16_rs<0>(s_flat, qf[ks], desc, ks > 0);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_keep(s_flat);

    const int key0 = t * BN;
    const bool edge = key0 + BN > ctx_len || (p.causal && key0 + BN - 1 > prefix + m0 + warp_row0);
#pragma unroll
    for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + nt * 8 + (lane % 4) * 2 + (e & 1);
        const bool masked = edge && (key >= ctx_len || (p.causal && key > qpos0 + 8 * (e / 2)));
        s[nt][e] = masked ? -INFINITY : s[nt][e] * p.scale_log2;
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m_run[r];
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base_m = mx == -INFINITY ? 0.f : mx;
      const float correction = exp2f(m_run[r] - base_m);
      m_run[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] - base_m);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - base_m);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      l_run[r] = l_run[r] * correction + sum;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[dt][2 * r] *= correction;
        o[dt][2 * r + 1] *= correction;
      }
    }

    const uint32_t v_tile = v_smem + stage * S::kTileBytes;
    float(&o_flat)[D / 2] = reinterpret_cast<float(&)[D / 2]>(o);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      const uint32_t pa[4] = {Elem<T>::pack(s[2 * ks][0], s[2 * ks][1]), Elem<T>::pack(s[2 * ks][2], s[2 * ks][3]),
                              Elem<T>::pack(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                              Elem<T>::pack(s[2 * ks + 1][2], s[2 * ks + 1][3])};
      // V is the transposed ("MN-major") B operand: 16 keys = two 8-row atoms
      // 1024 bytes apart, the two 64-column panels kPanelBytes apart.
      const uint64_t desc = wgmma_descriptor(v_tile + ks * 16 * 128, S::kPanelBytes, 1024);
      wgmma_m64n128k16_rs<1>(o_flat, pa, desc, 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_keep(o_flat);
    __syncthreads();
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
    for (int dt = 0; dt < D / 8; ++dt) dst[dt * 4] = Elem<T>::pack(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
  }
#endif
}

}  // namespace exactly::kernels::cuda
