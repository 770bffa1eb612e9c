// Hopper FlashAttention prefill with the softmax of one key tile overlapped
// with the tensor cores' work on its neighbours (FlashAttention-3's
// intra-warpgroup pipelining): while O += P_t V_t runs asynchronously, the
// scores S_{t+1} = Q K_{t+1}^T are already issued and their softmax computed;
// only the rescale of O waits for P_t V_t. Score and probability registers
// alternate between two sets (the loop is unrolled by two so every register
// index is a compile-time constant), and K/V tiles rotate through three
// shared-memory stages: one being read by each of the two products in
// flight and one being filled by cp.async. bf16, head dim 128.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"

namespace exactly::kernels::cuda {

template <int BN, int WG = 2>
struct Sm90PipelinedShape {
  static constexpr int kD = 128;
  static constexpr int kWarpgroups = WG;
  static constexpr int kBM = 64 * kWarpgroups;
  static constexpr int kThreads = 128 * kWarpgroups;
  static constexpr int kPanelBytes = BN * 128;
  static constexpr int kTileBytes = 2 * kPanelBytes;
  static constexpr int kStages = 3;
  static constexpr int kSmemBytes = 2 * kStages * kTileBytes + 1024;
  static_assert(BN == 64 || BN == 128, "wgmma N of the score product");
};

template <int BN, int WG = 2>
__global__ void __launch_bounds__(128 * WG) flash_prefill_sm90_pipelined_kernel(const PrefillParams p) {
#if defined(EXACTLY_HAS_WGMMA)
  using T = __nv_bfloat16;
  using S = Sm90PipelinedShape<BN, WG>;
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
  const int warp_row0 = (tid / 32) * 16;
  const int64_t token_stride = int64_t{p.n_heads} * D;
  const T* q = static_cast<const T*>(p.q);
  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
  const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;

  auto load_kv = [&](int tile) {
    const int stage = tile % S::kStages;
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

  auto issue_scores = [&](float (&s)[BN / 2], int tile) {
    const uint32_t k_tile = k_smem + (tile % S::kStages) * S::kTileBytes;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint64_t desc = wgmma_descriptor(k_tile + (ks / 4) * S::kPanelBytes + (ks % 4) * 32, S::kPanelBytes, 1024);
      if constexpr (BN == 64) {
        wgmma_m64n64k16_rs<0>(s, qf[ks], desc, ks > 0);
      } else {
        wgmma_m64n128k16_rs<0>(s, qf[ks], desc, ks > 0);
      }
    }
    wgmma_commit();
  };
  auto issue_pv = [&](const uint32_t (&pk)[BN / 16][4], int tile) {
    const uint32_t v_tile = v_smem + (tile % S::kStages) * S::kTileBytes;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks)
      wgmma_m64n128k16_rs<1>(o, pk[ks], wgmma_descriptor(v_tile + ks * 16 * 128, S::kPanelBytes, 1024), 1);
    wgmma_commit();
  };
  // Softmax of tile `tile`'s scores into packed probabilities; returns the
  // factor by which O (and l) must be rescaled once the previous P V is done.
  auto softmax = [&](float (&s)[BN / 2], uint32_t (&pk)[BN / 16][4], float (&correction)[2], int tile) {
    const int key0 = tile * BN;
    const bool edge = key0 + BN > ctx_len || (p.causal && key0 + BN - 1 > prefix + m0 + warp_row0);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
      const int key = key0 + (i / 4) * 8 + (lane % 4) * 2 + (i & 1);
      const bool masked = edge && (key >= ctx_len || (p.causal && key > qpos0 + 8 * ((i % 4) / 2)));
      s[i] = masked ? -INFINITY : s[i] * p.scale_log2;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m_run[r];
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base_m = mx == -INFINITY ? 0.f : mx;
      correction[r] = exp2f(m_run[r] - base_m);
      m_run[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        s[4 * j + 2 * r] = exp2f(s[4 * j + 2 * r] - base_m);
        s[4 * j + 2 * r + 1] = exp2f(s[4 * j + 2 * r + 1] - base_m);
        sum += s[4 * j + 2 * r] + s[4 * j + 2 * r + 1];
      }
      l_run[r] = l_run[r] * correction[r] + sum;
    }
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      pk[ks][0] = Elem<T>::pack(s[8 * ks + 0], s[8 * ks + 1]);
      pk[ks][1] = Elem<T>::pack(s[8 * ks + 2], s[8 * ks + 3]);
      pk[ks][2] = Elem<T>::pack(s[8 * ks + 4], s[8 * ks + 5]);
      pk[ks][3] = Elem<T>::pack(s[8 * ks + 6], s[8 * ks + 7]);
    }
  };
  auto rescale = [&](const float (&correction)[2]) {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] *= correction[(i % 4) / 2];
  };

  float s_a[BN / 2], s_b[BN / 2];
  uint32_t p_a[BN / 16][4], p_b[BN / 16][4];
  float correction[2];

  load_kv(0);
  cp_async_commit();
  if (n_tiles > 1) load_kv(1);
  cp_async_commit();
  cp_async_wait<1>();
  fence_proxy_async();
  __syncthreads();
  issue_scores(s_a, 0);
  wgmma_wait<0>();
  wgmma_keep(s_a);
  softmax(s_a, p_a, correction, 0);  // O is still zero: no rescale needed

  // One step: P_t V_t in flight while S_{t+1} is scored and soft-maxed.
  auto step = [&](int t, float (&s_next)[BN / 2], const uint32_t (&p_cur)[BN / 16][4],
                  uint32_t (&p_next)[BN / 16][4]) {
    cp_async_wait<0>();  // tile t+1 (issued a step ago) has landed
    fence_proxy_async();
    __syncthreads();  // ... for every thread, and nobody still reads tile t-1's stage
    if (t + 2 < n_tiles) load_kv(t + 2);
    cp_async_commit();
    const bool more = t + 1 < n_tiles;
    if (more) issue_scores(s_next, t + 1);
    issue_pv(p_cur, t);
    if (more) {
      wgmma_wait<1>();  // the scores (committed first) are done; P_t V_t may still run
      wgmma_keep(s_next);
      softmax(s_next, p_next, correction, t + 1);
      wgmma_wait<0>();
      wgmma_keep(o);
      rescale(correction);
    } else {
      wgmma_wait<0>();
      wgmma_keep(o);
    }
  };
  for (int t = 0; t < n_tiles; t += 2) {
    step(t, s_b, p_a, p_b);
    if (t + 1 < n_tiles) step(t + 1, s_a, p_b, p_a);
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
