// dK and dV on tensor cores: a CTA per (sequence, KV head, 64-key tile), each
// of its four warps owning 16 keys. The CTA walks the group's query heads in
// increasing order and, within each, the query tiles in increasing order from
// the first that sees any of its keys, recomputing per query tile
//   S^T = K Q^T, P^T = exp(S^T * scale - lse), dP^T = V dO^T,
//   dS^T = P^T (dP^T - D), dV += P^T dO, dK += dS^T Q
// with the keys as the rows of every product, so dK and dV stay in fp32
// registers for the whole walk and are written once. The K and V tile stays
// in shared memory; Q, dO, LSE and D are double-buffered by cp.async, the copy
// of step t + 1 running under the products of step t.
#include "kernels/cuda/flash_train.h"
#include "kernels/cuda/flash_train_launch.h"
#include "kernels/cuda/flash_train_tiles.cuh"

namespace exactly::kernels::cuda::flash_train {
namespace {

// Query rows per step of the walk: 32 at head dim 128, where 64 leaves too few
// registers for the scores beside the dK and dV accumulators (it spills).
template <int D>
constexpr int kStepRows = D == 128 ? 32 : 64;

// Shared memory: K and V tiles, then two stages of Q, dO, LSE and D.
template <int D>
struct KeyTileSmem {
  static constexpr int kKeyBytes = kTileBytes<kTile, D>;
  static constexpr int kRowsBytes = kTileBytes<kStepRows<D>, D>;
  static constexpr int kStageBytes = 2 * kRowsBytes + 2 * kStepRows<D> * 4;
  static constexpr int kBytes = 2 * kKeyBytes + 2 * kStageBytes;
  uint32_t base;

  __device__ uint32_t k() const { return base; }
  __device__ uint32_t v() const { return base + kKeyBytes; }
  __device__ uint32_t q(int stage) const { return base + 2 * kKeyBytes + stage * kStageBytes; }
  __device__ uint32_t d_out(int stage) const { return q(stage) + kRowsBytes; }
  __device__ uint32_t lse(int stage) const { return q(stage) + 2 * kRowsBytes; }
  __device__ uint32_t delta(int stage) const { return lse(stage) + kStepRows<D> * 4; }
};

// Step t of the walk: query head and first query row.
struct QueryStep {
  int head, q0;
};

// The walk over (query head, query tile); tiles before first_tile see none of
// the CTA's keys (causal mask) and are skipped.
struct Walk {
  int first_tile, n_tiles, n_steps, head0;
  __device__ QueryStep step(int t, int rows) const { return {head0 + t / n_tiles, (first_tile + t % n_tiles) * rows}; }
};

template <typename T, int D>
__device__ __forceinline__ void copy_step(const BackwardParams& p, const SeqSpan& s, QueryStep step,
                                          const KeyTileSmem<D>& sm, int stage) {
  constexpr int kRows = kStepRows<D>;
  const int64_t stride = int64_t{p.n_heads} * D;
  const int64_t head_offset = s.q0 * stride + step.head * D;
  copy_tile<kRows, D>(sm.q(stage), static_cast<const T*>(p.q) + head_offset, stride, step.q0, s.lq);
  copy_tile<kRows, D>(sm.d_out(stage), static_cast<const T*>(p.d_out) + head_offset, stride, step.q0, s.lq);
  for (int i = threadIdx.x; i < 2 * kRows; i += kThreads) {
    const bool is_delta = i >= kRows;
    const int row = step.q0 + i % kRows;
    const int64_t at = (s.q0 + row) * p.n_heads + step.head;
    const bool valid = row < s.lq && (!is_delta || s.q0 + row < p.delta_rows);
    const float* src = is_delta ? p.delta : p.lse;
    cp_async_4(sm.lse(stage) + i * 4, src + (valid ? at : 0), valid);  // delta(stage) follows lse(stage)
  }
}

// S^T into P^T in place: P = 2^(S * scale_log2 - lse * log2(e)) where query i
// sees key j, else 0 (rows are keys, columns queries). A query no key is
// visible to has lse -inf and is always hidden, so no inf - inf arises.
template <int N>
__device__ __forceinline__ void key_rows_probabilities(float (&s)[N / 8][4], const BackwardParams& p,
                                                       const SeqSpan& s_span, const float* lse, int key_row0, int q0,
                                                       bool edge) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt) {
    const float2 l = *reinterpret_cast<const float2*>(lse + nt * 8 + 2 * (lane % 4));
    const float lse_log2[2] = {l.x * kLog2e, l.y * kLog2e};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = q0 + nt * 8 + 2 * (lane % 4) + (e & 1);
      const int j = key_row0 + lane / 4 + 8 * (e / 2);
      const bool hidden = edge && (i >= s_span.lq || (p.causal && j > i + s_span.lk - s_span.lq));
      s[nt][e] = hidden ? 0.f : exp2_approx(fmaf(s[nt][e], p.scale_log2, -lse_log2[e & 1]));
    }
  }
}

// dP^T into dS^T in place: dS = P (dP - D), D per column (query).
template <int N>
__device__ __forceinline__ void key_rows_ds(const float (&prob)[N / 8][4], float (&dp)[N / 8][4], const float* delta) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt) {
    const float2 d = *reinterpret_cast<const float2*>(delta + nt * 8 + 2 * (lane % 4));
    dp[nt][0] = prob[nt][0] * (dp[nt][0] - d.x), dp[nt][1] = prob[nt][1] * (dp[nt][1] - d.y);
    dp[nt][2] = prob[nt][2] * (dp[nt][2] - d.x), dp[nt][3] = prob[nt][3] * (dp[nt][3] - d.y);
  }
}

__device__ __forceinline__ const float* shared_floats(const unsigned char* smem, uint32_t smem_base, uint32_t at) {
  return reinterpret_cast<const float*>(smem + (at - smem_base));
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) key_tile_kernel(const BackwardParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int kRows = kStepRows<D>;
  const SeqSpan s = seq_span(p, blockIdx.z);
  const int key0 = blockIdx.x * kTile;
  if (key0 >= s.lk) return;
  const int kv_head = blockIdx.y, warp = threadIdx.x / 32;
  const KeyTileSmem<D> sm{smem_address(smem)};
  const int first_tile = s.first_query_seeing(p.causal, key0) / kRows;
  const int n_tiles = (s.lq + kRows - 1) / kRows - first_tile;
  const Walk walk{first_tile, n_tiles, n_tiles * p.group, kv_head * p.group};

  const int64_t kv_stride = int64_t{p.n_kv_heads} * D;
  const int64_t kv_offset = s.k0 * kv_stride + kv_head * D;
  copy_tile<kTile, D>(sm.k(), static_cast<const T*>(p.k) + kv_offset, kv_stride, key0, s.lk);
  copy_tile<kTile, D>(sm.v(), static_cast<const T*>(p.v) + kv_offset, kv_stride, key0, s.lk);
  if (walk.n_steps > 0) copy_step<T, D>(p, s, walk.step(0, kRows), sm, 0);
  cp_async_commit();

  const int key_row0 = key0 + warp * 16;  // the warp's first key
  float dk[D / 8][4], dv[D / 8][4];
  zero(dk), zero(dv);
  auto copy = [&](int t) { copy_step<T, D>(p, s, walk.step(t, kRows), sm, t & 1); };
  walk_double_buffered(walk.n_steps, copy, [&](int t) {
    const int stage = t & 1;
    const QueryStep step = walk.step(t, kRows);
    // Whether any (query, key) pair of the warp's is hidden: past the queries,
    // or a key after some query's last visible one.
    const bool edge = step.q0 + kRows > s.lq || (p.causal && key_row0 + 15 > step.q0 + s.lk - s.lq);
    float st[kRows / 8][4], dpt[kRows / 8][4];
    zero(st), zero(dpt);
    rows_times_rows<T, D, kRows>(st, sm.k(), warp * 16, sm.q(stage));
    rows_times_rows<T, D, kRows>(dpt, sm.v(), warp * 16, sm.d_out(stage));
    key_rows_probabilities<kRows>(st, p, s, shared_floats(smem, sm.base, sm.lse(stage)), key_row0, step.q0, edge);
    weights_times_rows<T, D, kRows>(dv, st, sm.d_out(stage));
    key_rows_ds<kRows>(st, dpt, shared_floats(smem, sm.base, sm.delta(stage)));
    weights_times_rows<T, D, kRows>(dk, dpt, sm.q(stage));
  });
  const float dk_factor[2] = {p.scale, p.scale}, dv_factor[2] = {1.f, 1.f};
  store_rows<T, D>(dk, static_cast<T*>(p.dk) + kv_offset, kv_stride, key_row0, s.lk, dk_factor);
  store_rows<T, D>(dv, static_cast<T*>(p.dv) + kv_offset, kv_stride, key_row0, s.lk, dv_factor);
}

template <typename T, int D>
void launch(const BackwardParams& p, const FlashTrainShape& s, cudaStream_t stream) {
  constexpr int kSmemBytes = KeyTileSmem<D>::kBytes;
  constexpr auto kernel = key_tile_kernel<T, D>;
  allow_shared_memory<kernel>(kSmemBytes, "flash_train_backward (dK, dV): shared memory limit");
  const dim3 grid(ceil_div(s.max_k_len, kTile), s.n_kv_heads, s.n_seqs);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(p);
  check_launch("flash_train_backward (dK, dV)");
}

}  // namespace

void launch_key_tile_gradients(const BackwardParams& p, const FlashTrainShape& s, cudaStream_t stream) {
  with_element_type(s.dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    with_head_dim(s.head_dim, [&](auto d) { launch<T, decltype(d)::value>(p, s, stream); });
  });
}

}  // namespace exactly::kernels::cuda::flash_train
