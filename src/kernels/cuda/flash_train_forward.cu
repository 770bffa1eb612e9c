// The training forward on tensor cores: a CTA per (sequence, query head,
// 64-query tile), each of its four warps owning 16 query rows and walking the
// key tiles in increasing order with an online softmax in fp32 registers,
// then writing out and each row's LSE. K and V tiles are double-buffered in
// shared memory by cp.async: the copy of tile t + 1 runs under the products
// of tile t.
#include <cmath>

#include "kernels/cuda/flash_train.h"
#include "kernels/cuda/flash_train_launch.h"
#include "kernels/cuda/flash_train_tiles.cuh"

namespace exactly::kernels::cuda::flash_train {
namespace {

// A thread's two rows of the online softmax: running maximum m (of the scores
// in the exp2 domain) and this thread's part of the running sum l.
struct RowSoftmax {
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.f, 0.f};

  // s: one key tile's scores times scale * log2(e), -inf where hidden; they
  // become the unnormalised probabilities 2^(s - m), and O and l are scaled by
  // how far the maximum moved (by exactly 1 when it did not).
  template <int D>
  __device__ __forceinline__ void step(float (&s)[kTile / 8][4], float (&o)[D / 8][4]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m[r];
#pragma unroll
      for (int nt = 0; nt < kTile / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base = mx == -INFINITY ? 0.f : mx;  // a row that has seen no key yet
      const float correction = mx == m[r] ? 1.f : exp2_approx(m[r] - base);
      m[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < kTile / 8; ++nt) {
        s[nt][2 * r] = exp2_approx(s[nt][2 * r] - base);
        s[nt][2 * r + 1] = exp2_approx(s[nt][2 * r + 1] - base);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      l[r] = l[r] * correction + sum;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) o[dt][2 * r] *= correction, o[dt][2 * r + 1] *= correction;
    }
  }

  // The whole row's sum (the four threads of a row combined).
  __device__ __forceinline__ float row_sum(int r) const {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    return sum;
  }
};

// Scores into the exp2 domain; those of keys a row does not see become -inf.
// Only tiles on an edge (`edge`, uniform over the warp) test each key.
__device__ __forceinline__ void scale_and_mask(float (&s)[kTile / 8][4], float scale_log2, int key0,
                                               const int (&visible)[2], bool edge) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int nt = 0; nt < kTile / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + nt * 8 + 2 * (lane % 4) + (e & 1);
      s[nt][e] = edge && key >= visible[e / 2] ? -INFINITY : s[nt][e] * scale_log2;
    }
  }
}

template <typename T, int D>
__device__ __forceinline__ void store_output(const ForwardParams& p, const SeqSpan& s, int head, int row0,
                                             const RowSoftmax& softmax, const float (&o)[D / 8][4]) {
  const int lane = threadIdx.x % 32;
  const int64_t stride = int64_t{p.n_heads} * D;
  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = softmax.row_sum(r);
    inverse[r] = l > 0.f ? 1.f / l : 0.f;
    const int row = row0 + lane / 4 + 8 * r;
    // lse = ln(sum_j e^(scale * s_j)) = (m + log2 l) * ln 2, with m in the exp2 domain.
    if (lane % 4 == 0 && row < s.lq)
      p.lse[(s.q0 + row) * p.n_heads + head] = l > 0.f ? (softmax.m[r] + log2f(l)) * kLn2 : -INFINITY;
  }
  T* rows = static_cast<T*>(p.out) + s.q0 * stride + head * D;
  store_rows<T, D>(o, rows, stride, row0, s.lq, inverse);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) forward_kernel(const ForwardParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const SeqSpan s = seq_span(p, blockIdx.z);
  const QueryTile tile = query_tile(s, p.causal);
  const int m0 = tile.m0, n_tiles = tile.n_key_tiles;
  if (m0 >= s.lq) return;
  const int head = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kBytes = kTileBytes<kTile, D>;
  const uint32_t q_tile = smem_address(smem), k_tiles = q_tile + kBytes, v_tiles = k_tiles + 2 * kBytes;

  const int64_t q_stride = int64_t{p.n_heads} * D, kv_stride = int64_t{p.n_kv_heads} * D;
  const int kv_head = head / p.group;
  const T* k_rows = static_cast<const T*>(p.k) + s.k0 * kv_stride + kv_head * D;
  const T* v_rows = static_cast<const T*>(p.v) + s.k0 * kv_stride + kv_head * D;
  auto copy_keys = [&](int tile) {
    const int stage = tile & 1;
    copy_tile<kTile, D>(k_tiles + stage * kBytes, k_rows, kv_stride, tile * kTile, s.lk);
    copy_tile<kTile, D>(v_tiles + stage * kBytes, v_rows, kv_stride, tile * kTile, s.lk);
  };
  copy_tile<kTile, D>(q_tile, static_cast<const T*>(p.q) + s.q0 * q_stride + head * D, q_stride, m0, s.lq);
  cp_async_commit();
  if (n_tiles > 0) copy_keys(0);
  cp_async_commit();

  const int row0 = m0 + warp * 16;  // the warp's first row; the thread's are row0 + lane / 4 + 8 r
  const int visible[2] = {s.visible(p.causal, row0 + lane / 4), s.visible(p.causal, row0 + lane / 4 + 8)};
  const int warp_visible = s.visible(p.causal, row0);  // the fewest keys any of the warp's rows sees
  RowSoftmax softmax;
  float o[D / 8][4];
  zero(o);
  walk_double_buffered(n_tiles, copy_keys, [&](int t) {
    float sc[kTile / 8][4];
    zero(sc);
    rows_times_rows<T, D, kTile>(sc, q_tile, warp * 16, k_tiles + (t & 1) * kBytes);
    scale_and_mask(sc, p.scale_log2, t * kTile, visible, t * kTile + kTile > warp_visible);
    softmax.step<D>(sc, o);
    weights_times_rows<T, D, kTile>(o, sc, v_tiles + (t & 1) * kBytes);
  });
  store_output<T, D>(p, s, head, row0, softmax, o);
}

template <typename T, int D>
void launch_forward(const ForwardParams& p, const FlashTrainShape& s, cudaStream_t stream) {
  constexpr int kSmemBytes = 5 * kTileBytes<kTile, D>;  // Q, and two stages of K and V
  constexpr auto kernel = forward_kernel<T, D>;
  allow_shared_memory<kernel>(kSmemBytes, "flash_train_forward: shared memory limit");
  const dim3 grid(ceil_div(s.max_q_len, kTile), s.n_heads, s.n_seqs);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(p);
  check_launch("flash_train_forward");
}

}  // namespace
}  // namespace exactly::kernels::cuda::flash_train

namespace exactly::kernels::cuda {

void flash_train_forward(const FlashTrainShape& shape, float scale, const void* q, const void* k, const void* v,
                         void* out, float* lse, cudaStream_t stream) {
  using namespace flash_train;
  constexpr const char* kOp = "flash_train_forward";
  check_shape(shape, scale, kOp);
  if (shape.n_seqs == 0 || shape.max_q_len == 0) return;  // no query row to write
  check_rows(q, "q", kOp), check_rows(k, "k", kOp), check_rows(v, "v", kOp), check_rows(out, "out", kOp);
  EXACTLY_CUDA_REQUIRE(lse != nullptr, "%s: lse is null", kOp);
  const ForwardParams p{varlen_params(shape, scale, q, k, v), out, lse};
  with_element_type(shape.dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    with_head_dim(shape.head_dim, [&](auto d) { launch_forward<T, decltype(d)::value>(p, shape, stream); });
  });
}

}  // namespace exactly::kernels::cuda
