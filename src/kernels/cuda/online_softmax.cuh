// The online softmax of the Hopper prefill kernels: one warp's 16 query rows
// against a tile of BN keys, the scores held in the mma accumulator layout
// (element i: row lane/4 + 8 * ((i % 4) / 2), key key0 + 8 * (i / 4) +
// 2 * (lane % 4) + (i & 1)).
//
// Written for instruction count, since the softmax shares the issue slots of
// the warps that feed the tensor cores: running maxima are kept on the raw
// scores, so scaling and subtracting the maximum is one FFMA per score; the
// exponential is one MUFU.EX2; masking is a separate pass of selects that
// only the tiles on an edge run (a uniform branch), where a per-score
// short-circuit test compiled to a branch per score.
#pragma once

#include <cmath>

namespace exactly::kernels::cuda {

// 2^x as one MUFU.EX2. exp2f without fast math wraps each one in a range check
// and two multiplies; here results below 2^-126 flush to zero, which changes a
// probability by less than 2^-126 of its row's largest.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int BN>
struct OnlineSoftmax {
  static constexpr int kScores = BN / 2;
  float m_run[2] = {-INFINITY, -INFINITY};  // running maximum of each row's raw scores
  float l_run[2] = {0.f, 0.f};              // this thread's part of each row's sum
  float correction[2] = {1.f, 1.f};         // the factor by which O must be rescaled for the last tile

  // Scores of keys at or past ctx_len, and (causal) of keys after the row's
  // own position, become -inf.
  __device__ __forceinline__ static void mask(float (&s)[kScores], int key0, int lane, int ctx_len, bool causal,
                                              int qpos0) {
#pragma unroll
    for (int i = 0; i < kScores; ++i) {
      const int key = key0 + (i / 4) * 8 + (lane % 4) * 2 + (i & 1);
      const int qpos = qpos0 + 8 * ((i % 4) / 2);
      const bool hidden = (key >= ctx_len) | (causal & (key > qpos));
      s[i] = hidden ? -INFINITY : s[i];
    }
  }

  // Raw scores to unnormalised probabilities 2^(s * scale_log2 - max), in place.
  // kRows = 1 updates the first row of each thread only (where no thread
  // has a second one), leaving the second's state as it was.
  template <int kRows = 2>
  __device__ __forceinline__ void update(float (&s)[kScores], float scale_log2) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float mx = m_run[r];
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base = mx == -INFINITY ? 0.f : mx * scale_log2;  // a row with no visible key yet
      // Exactly 1 when the maximum did not move, so that a tile which raises
      // no score (a fully masked one among them) leaves O and l as they were:
      // a row's bits do not depend on how many tiles past its last key its
      // query block walks (prompt chunks of any size, decode rows beside them).
      correction[r] = m_run[r] == mx ? 1.f : exp2_approx(fmaf(m_run[r], scale_log2, -base));
      m_run[r] = mx;
      float sum_even = 0.f, sum_odd = 0.f;  // two chains: half the dependent adds
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const float a = exp2_approx(fmaf(s[4 * j + 2 * r], scale_log2, -base));
        const float b = exp2_approx(fmaf(s[4 * j + 2 * r + 1], scale_log2, -base));
        s[4 * j + 2 * r] = a;
        s[4 * j + 2 * r + 1] = b;
        sum_even += a;
        sum_odd += b;
      }
      l_run[r] = l_run[r] * correction[r] + (sum_even + sum_odd);
    }
  }

  // O *= the last tile's correction, in the same accumulator layout (D / 2 values).
  template <int N>
  __device__ __forceinline__ void rescale(float (&o)[N]) const {
#pragma unroll
    for (int i = 0; i < N; ++i) o[i] *= correction[(i % 4) / 2];
  }

  // The whole row's sum (the four threads of a row combined).
  __device__ __forceinline__ float row_sum(int r) const {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    return l;
  }
  // 1 / the row's sum, 0 for a row that saw no key.
  __device__ __forceinline__ float inverse_sum(int r) const {
    const float l = row_sum(r);
    return l > 0.f ? 1.f / l : 0.f;
  }
};

}  // namespace exactly::kernels::cuda
