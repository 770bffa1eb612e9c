// Device pieces the training FlashAttention kernels share (flash_train.h): a
// sequence's span and causal rule, cp.async copies of row tiles into shared
// memory, the two warp-level products every pass is built from, and the
// store of a warp's rows.
//
// A tile in shared memory holds rows of one head, D 16-bit elements each,
// swizzled (mma_primitives.cuh). A warp owns 16 rows of its CTA's tile; the
// products keep fp32 accumulators in the mma.sync C layout: element e of
// n-tile nt is row lane / 4 + 8 * (e / 2), column nt * 8 + 2 * (lane % 4) +
// e % 2, so a thread holds two rows (r = 0, 1) of each tile.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_train_launch.h"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/online_softmax.cuh"

namespace exactly::kernels::cuda::flash_train {

constexpr int kTile = 64;  // query rows of a query tile, keys of a key tile
constexpr int kWarps = 4;  // 16 rows each
constexpr int kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int ROWS, int D>
constexpr int kTileBytes = ROWS* D * 2;

// One sequence's rows in the flattened batch.
struct SeqSpan {
  int64_t q0, k0;  // first query row, first key row
  int lq, lk;      // query and key counts

  // Keys 0..visible(i)-1 are what query i sees: all of them, or under the
  // causal mask those up to i + lk - lq (the ends aligned).
  __device__ __forceinline__ int visible(bool causal, int i) const {
    return causal ? min(max(i + lk - lq + 1, 0), lk) : lk;
  }
  // The first query that sees key j (lq when none does).
  __device__ __forceinline__ int first_query_seeing(bool causal, int j) const {
    if (!causal) return j < lk ? 0 : lq;
    return min(max(j - lk + lq, 0), lq);
  }
};

__device__ __forceinline__ SeqSpan seq_span(const VarlenParams& p, int seq) {
  const int q0 = p.cu_q[seq], k0 = p.cu_k[seq];
  return {q0, k0, p.cu_q[seq + 1] - q0, p.cu_k[seq + 1] - k0};
}

// The query tile of a CTA of a grid over (query tiles, heads, sequences):
// its first row m0 (blocks take the tiles from the last, which under a
// causal mask see the most keys, so those start first) and the key tiles its
// rows see. m0 >= lq: no tile of this sequence.
struct QueryTile {
  int m0, n_key_tiles;
};

__device__ __forceinline__ QueryTile query_tile(const SeqSpan& s, bool causal) {
  const int m0 = (gridDim.x - 1 - blockIdx.x) * kTile;
  const int n_keys = m0 < s.lq ? s.visible(causal, min(m0 + kTile, s.lq) - 1) : 0;
  return {m0, (n_keys + kTile - 1) / kTile};
}

// Rows first..first+ROWS-1 of `rows` (row i at rows + i * stride) into the
// swizzled tile at `dst`. Rows at or past `count` are zero-filled rather than
// left stale, since 0 times stale bits can be NaN in a product.
template <int ROWS, int D, typename T>
__device__ __forceinline__ void copy_tile(uint32_t dst, const T* rows, int64_t stride, int first, int count) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int i = threadIdx.x; i < ROWS * kChunks; i += kThreads) {
    const int row = i / kChunks, chunk = i % kChunks;
    const bool valid = first + row < count;
    const T* src = rows + (valid ? (first + row) * stride : 0) + chunk * 8;
    cp_async_16(dst + swizzled(row, chunk, D * 2), src, valid);
  }
}

// 4 bytes global -> shared; zero-filled (and nothing read) when !valid.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

// The double-buffered walk every pass makes: step t's operands were copied
// (cp.async) into stage t & 1 before it runs, step t + 1's copy is issued
// before step t waits, so it lands under step t's products. `copy(t)` issues
// step t's copies; `body(t)` runs step t once its stage has landed. An empty
// commit group keeps wait<1> meaning "step t has landed" on the last step; the
// barrier after the body keeps a stage from being refilled while a warp reads
// it. The caller has issued and committed step 0's copies (beside anything
// else the CTA loads first).
template <class Copy, class Body>
__device__ __forceinline__ void walk_double_buffered(int n_steps, Copy&& copy, Body&& body) {
  for (int t = 0; t < n_steps; ++t) {
    if (t + 1 < n_steps) copy(t + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    body(t);
    __syncthreads();
  }
  cp_async_wait<0>();
}

template <int N>
__device__ __forceinline__ void zero(float (&acc)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
}

// acc (16 x N) += A B^T, summed over D: A the warp's 16 rows a_row0.. of tile
// `a`, B the N rows of tile `b` (both [row][D]). S = Q K^T, dP = dO V^T and
// their transposes are all this product.
template <typename T, int D, int N>
__device__ __forceinline__ void rows_times_rows(float (&acc)[N / 8][4], uint32_t a, int a_row0, uint32_t b) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t af[4];
    ldmatrix_x4(af, a + swizzled(a_row0 + lane % 16, ks * 2 + lane / 16, D * 2));
#pragma unroll
    for (int nt = 0; nt < N / 8; nt += 2) {
      uint32_t bf[4];  // n-tiles nt and nt + 1, k halves 0 and 1 of each
      ldmatrix_x4(bf, b + swizzled(nt * 8 + (lane / 16) * 8 + lane % 8, ks * 2 + (lane / 8) % 2, D * 2));
      Elem<T>::mma(acc[nt], af, bf[0], bf[1]);
      Elem<T>::mma(acc[nt + 1], af, bf[2], bf[3]);
    }
  }
}

// acc (16 x D) += W B, summed over N: W the warp's 16 x N weights in the C
// layout, rounded to T here (the C layout of two adjacent n-tiles is the A
// layout of one k-slice), B the N rows of tile `b` ([row][D]). O += P V,
// dV += P^T dO, dK += dS^T Q and dQ += dS K are all this product.
template <typename T, int D, int N>
__device__ __forceinline__ void weights_times_rows(float (&acc)[D / 8][4], const float (&w)[N / 8][4], uint32_t b) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int ks = 0; ks < N / 16; ++ks) {
    const uint32_t wf[4] = {Elem<T>::pack(w[2 * ks][0], w[2 * ks][1]), Elem<T>::pack(w[2 * ks][2], w[2 * ks][3]),
                            Elem<T>::pack(w[2 * ks + 1][0], w[2 * ks + 1][1]),
                            Elem<T>::pack(w[2 * ks + 1][2], w[2 * ks + 1][3])};
#pragma unroll
    for (int dt = 0; dt < D / 8; dt += 2) {
      uint32_t bf[4];  // columns dt and dt + 1, k halves 0 and 1 of each
      ldmatrix_x4_trans(bf, b + swizzled(ks * 16 + lane % 8 + ((lane / 8) % 2) * 8, dt + lane / 16, D * 2));
      Elem<T>::mma(acc[dt], wf, bf[0], bf[1]);
      Elem<T>::mma(acc[dt + 1], wf, bf[2], bf[3]);
    }
  }
}

// Writes the warp's 16 x D accumulator rows, row r of the thread times
// factor[r], as T: warp row i goes to rows + (first + i) * stride; rows at or
// past `count` are not written.
template <typename T, int D>
__device__ __forceinline__ void store_rows(const float (&acc)[D / 8][4], T* rows, int64_t stride, int first, int count,
                                           const float (&factor)[2]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = first + lane / 4 + 8 * r;
    if (row >= count) continue;
    uint32_t* dst = reinterpret_cast<uint32_t*>(rows + row * stride + (lane % 4) * 2);
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      dst[dt * 4] = Elem<T>::pack(acc[dt][2 * r] * factor[r], acc[dt][2 * r + 1] * factor[r]);
  }
}

}  // namespace exactly::kernels::cuda::flash_train
