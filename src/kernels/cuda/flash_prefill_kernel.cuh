// FlashAttention forward on tensor cores (mma.sync, sm_80+), reading K/V
// through the paged block table. One CTA computes a tile of kBM query rows of
// one head of one sequence; each warp owns 16 rows and walks the key tiles
// with an online softmax kept in registers, so no score tile ever leaves the
// register file. K/V tiles are double-buffered in shared memory by cp.async:
// the copy of tile t+1 runs under the matrix products of tile t.
#pragma once

#include <cstdint>

#include "kernels/cuda/attention_params.h"
#include "kernels/cuda/mma_primitives.cuh"

namespace exactly::kernels::cuda {

struct PrefillParams : PagedAttentionParams<void> {
  bool causal;
};

template <int D, int WARPS, int BN, int MT>
struct PrefillShape {
  static constexpr int kRowsPerWarp = 16 * MT;
  static constexpr int kBM = kRowsPerWarp * WARPS;
  static constexpr int kThreads = 32 * WARPS;
  static constexpr int kRowBytes = D * 2;
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr int kQBytes = kBM * kRowBytes;
  static constexpr int kTileBytes = BN * kRowBytes;
  static constexpr int kStages = 2;
  static constexpr int kSmemBytes = kQBytes + 2 * kStages * kTileBytes;
  static_assert(D % 64 == 0, "the swizzle needs at least eight chunks per row");
  static_assert(BN % 16 == 0, "key tiles are whole k-slices of the second product");
};

// MT m-tiles (16 rows each) per warp: every K/V fragment read from shared
// memory feeds MT matrix products, which is what keeps ldmatrix from being
// the bottleneck. With MT = 1 the query fragments stay in registers; with
// MT > 1 there is no room for them and they are re-read per key tile.
template <typename T, int D, int WARPS, int BN, int MT>
__global__ void __launch_bounds__(32 * WARPS) flash_prefill_kernel(const PrefillParams p) {
  using S = PrefillShape<D, WARPS, BN, MT>;
  extern __shared__ __align__(128) unsigned char smem[];

  const int seq = blockIdx.z;
  const int head = blockIdx.y;
  const int q_begin = p.query_start[seq];
  const int q_len = p.query_start[seq + 1] - q_begin;
  // Heaviest (latest, most keys under the causal mask) tiles launch first.
  const int m0 = (gridDim.x - 1 - blockIdx.x) * S::kBM;
  if (m0 >= q_len) return;
  const int ctx_len = p.seq_lens[seq];
  const int prefix = ctx_len - q_len;  // cached keys before this chunk
  const int kv_head = head / p.group;
  const int n_keys = p.causal ? min(ctx_len, prefix + min(q_len, m0 + S::kBM)) : ctx_len;
  const int n_tiles = (n_keys + BN - 1) / BN;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int64_t token_stride = int64_t{p.n_heads} * D;

  const T* q = static_cast<const T*>(p.q);
  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
  const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;

  const uint32_t q_smem = smem_address(smem);
  const uint32_t k_smem = q_smem + S::kQBytes;
  const uint32_t v_smem = k_smem + S::kStages * S::kTileBytes;

  for (int i = tid; i < S::kBM * S::kChunks; i += S::kThreads) {
    const int row = i / S::kChunks, chunk = i % S::kChunks;
    const bool valid = m0 + row < q_len;
    const T* src = q + (q_begin + (valid ? m0 + row : 0)) * token_stride + head * D + chunk * 8;
    cp_async_16(q_smem + swizzled(row, chunk, S::kRowBytes), src, valid);
  }
  cp_async_commit();

  auto load_kv = [&](int tile, int stage) {
    for (int i = tid; i < BN * S::kChunks; i += S::kThreads) {
      const int row = i / S::kChunks, chunk = i % S::kChunks;
      const int key = tile * BN + row;
      const bool valid = key < n_keys;
      const int64_t slot = valid ? int64_t{table[key / p.block_size]} * p.block_size + key % p.block_size : 0;
      const int64_t offset = (slot * p.n_kv_heads + kv_head) * D + chunk * 8;
      const uint32_t dst = stage * S::kTileBytes + swizzled(row, chunk, S::kRowBytes);
      cp_async_16(k_smem + dst, kc + offset, valid);
      cp_async_16(v_smem + dst, vc + offset, valid);  // zero-filled: 0 * garbage could be NaN
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  cp_async_wait<1>();  // the query tile
  __syncthreads();
  const int warp_row0 = warp * S::kRowsPerWarp;
  auto q_fragment = [&](uint32_t (&f)[4], int mt, int ks) {
    ldmatrix_x4(f, q_smem + swizzled(warp_row0 + mt * 16 + lane % 16, ks * 2 + lane / 16, S::kRowBytes));
  };
  uint32_t q_regs[MT == 1 ? D / 16 : 1][4];
  if constexpr (MT == 1) {
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) q_fragment(q_regs[ks], 0, ks);
  }

  float o[MT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
  float m_run[MT][2], l_run[MT][2];  // l: this thread's columns only; the quad sums at the end
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m_run[mt][0] = m_run[mt][1] = -INFINITY, l_run[mt][0] = l_run[mt][1] = 0.f;

  for (int t = 0; t < n_tiles; ++t) {
    const int stage = t & 1;
    if (t + 1 < n_tiles) load_kv(t + 1, stage ^ 1);
    cp_async_commit();  // possibly empty: keeps wait<1> meaning "tile t has landed"
    cp_async_wait<1>();
    __syncthreads();

    float s[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
    const uint32_t k_tile = k_smem + stage * S::kTileBytes;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t qf[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (MT == 1) {
          qf[0][0] = q_regs[ks][0], qf[0][1] = q_regs[ks][1], qf[0][2] = q_regs[ks][2], qf[0][3] = q_regs[ks][3];
        } else {
          q_fragment(qf[mt], mt, ks);
        }
      }
#pragma unroll
      for (int nt = 0; nt < BN / 8; nt += 2) {
        uint32_t kb[4];
        ldmatrix_x4(kb, k_tile + swizzled(nt * 8 + (lane / 16) * 8 + lane % 8, ks * 2 + (lane / 8) % 2,
                                          S::kRowBytes));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Elem<T>::mma(s[mt][nt], qf[mt], kb[0], kb[1]);
          Elem<T>::mma(s[mt][nt + 1], qf[mt], kb[2], kb[3]);
        }
      }
    }

    const int key0 = t * BN;
    const bool edge = key0 + BN > ctx_len || (p.causal && key0 + BN - 1 > prefix + m0 + warp_row0);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int qpos0 = prefix + m0 + warp_row0 + mt * 16 + lane / 4;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nt * 8 + (lane % 4) * 2 + (e & 1);
          const bool masked = edge && (key >= ctx_len || (p.causal && key > qpos0 + 8 * (e / 2)));
          s[mt][nt][e] = masked ? -INFINITY : s[mt][nt][e] * p.scale_log2;
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = m_run[mt][r];
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float base = mx == -INFINITY ? 0.f : mx;  // a row with no visible key yet
        const float correction = exp2f(m_run[mt][r] - base);
        m_run[mt][r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < BN / 8; ++nt) {
          s[mt][nt][2 * r] = exp2f(s[mt][nt][2 * r] - base);
          s[mt][nt][2 * r + 1] = exp2f(s[mt][nt][2 * r + 1] - base);
          sum += s[mt][nt][2 * r] + s[mt][nt][2 * r + 1];
        }
        l_run[mt][r] = l_run[mt][r] * correction + sum;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          o[mt][dt][2 * r] *= correction;
          o[mt][dt][2 * r + 1] *= correction;
        }
      }
    }

    const uint32_t v_tile = v_smem + stage * S::kTileBytes;
#pragma unroll
    for (int ks = 0; ks < BN / 16; ++ks) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = Elem<T>::pack(s[mt][2 * ks][0], s[mt][2 * ks][1]);
        pa[mt][1] = Elem<T>::pack(s[mt][2 * ks][2], s[mt][2 * ks][3]);
        pa[mt][2] = Elem<T>::pack(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]);
        pa[mt][3] = Elem<T>::pack(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]);
      }
#pragma unroll
      for (int dt = 0; dt < D / 8; dt += 2) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, v_tile + swizzled(ks * 16 + lane % 8 + ((lane / 8) % 2) * 8, dt + lane / 16,
                                                S::kRowBytes));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Elem<T>::mma(o[mt][dt], pa[mt], vb[0], vb[1]);
          Elem<T>::mma(o[mt][dt + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = l_run[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int row = m0 + warp_row0 + mt * 16 + lane / 4 + 8 * r;
      if (row >= q_len) continue;
      uint32_t* dst =
          reinterpret_cast<uint32_t*>(out + (q_begin + row) * token_stride + head * D + (lane % 4) * 2);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        dst[dt * 4] = Elem<T>::pack(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv);
    }
  }
}

}  // namespace exactly::kernels::cuda
