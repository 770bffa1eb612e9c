// The epilogue of the Hopper prefill kernel: an item's output from a
// consumer warp's accumulators into global memory, normalised by its rows'
// sums, after the pieces of a split item are merged.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/cuda/prefill_schedule.h"
#include "kernels/cuda/sm90_prefill/features.cuh"
#include "kernels/cuda/sm90_prefill/hook.cuh"
#include "kernels/cuda/sm90_prefill/tile_scheduler.cuh"

namespace exactly::kernels::cuda {

template <class F, class Hook = Sm90WsNoHook>
class Sm90WsEpilogue {
 public:
  using T = __nv_bfloat16;
  static constexpr int D = F::kHeadDim;

  // ctid: the thread's index among the consumers.
  __device__ Sm90WsEpilogue(const PrefillParams& p, const Sm90WsSchedule& sched, int ctid)
      : p_(p), sched_(sched), ctid_(ctid) {}

  // An item's output is o, unnormalised, in the accumulator layout of the
  // thread's two rows, whose raw maxima and sums are mx and sum. A piece of
  // a split item (w.piece >= 0, sm90_ws_split) leaves its partial result in
  // the workspace, then arrives for the warp's rows; the last of the item's
  // pieces to arrive merges them all in piece order, whichever arrived last,
  // into o and sum and returns true (store them); the others return false.
  // Each lane fences its own writes before the count and after reading it
  // (the pattern of a last-block reduction); the pieces are read from L2.
  __device__ __forceinline__ bool merge_pieces(const Sm90WsDesc& w, float (&o)[D / 2], const float (&mx)[2],
                                               float (&sum)[2]) const {
    using S = Sm90WsShape<F>;
    constexpr int CLUSTER = F::kCluster;
    constexpr int kChunks = Sm90WsPartial<D>::kChunks, kThreads = S::kConsumerThreads;
    // Which of the item's query blocks this CTA holds: in a cluster the CTAs
    // take the two blocks in turns, so the CTA's rank does not say.
    const int half = (w.m0 / S::kBM) % CLUSTER;
    const int pieces = sched_.split_pieces, split = w.piece / pieces, first = split * pieces;
    const int tiles = (w.pair_keys + F::kTileKeys - 1) / F::kTileKeys;
    auto slot = [&](int piece) {
      return reinterpret_cast<float4*>(sched_.partials) + (int64_t{piece} * CLUSTER + half) * kChunks * kThreads +
             ctid_;
    };
    // A piece of an item shorter than `pieces` tiles may be empty: it never ran.
    auto ran = [&](int part) {
      return sm90_ws_part_first(tiles, part, pieces) != sm90_ws_part_end(tiles, part, pieces);
    };
    float4* mine = slot(w.piece);
#pragma unroll
    for (int c = 0; c < D / 8; ++c)
      mine[c * kThreads] = make_float4(o[4 * c], o[4 * c + 1], o[4 * c + 2], o[4 * c + 3]);
    mine[(kChunks - 1) * kThreads] = make_float4(mx[0], mx[1], sum[0], sum[1]);
    __threadfence();
    __syncwarp();
    int* arrivals = sched_.arrivals + (split * CLUSTER + half) * S::kConsumerWarps + ctid_ / 32;
    int last = 0;
    if (ctid_ % 32 == 0) last = atomicAdd(arrivals, 1) == min(pieces, tiles) - 1;
    if (!__shfl_sync(0xffffffffu, last, 0)) return false;
    if (ctid_ % 32 == 0) *arrivals = 0;  // every piece has arrived: zero for the next launch
    __threadfence();
    float base[2] = {-INFINITY, -INFINITY};
    for (int part = 0; part < pieces; ++part) {
      if (!ran(part)) continue;
      const float4 ml = __ldcg(slot(first + part) + (kChunks - 1) * kThreads);
      if (ml.z > 0.f) base[0] = fmaxf(base[0], ml.x * p_.scale_log2);
      if (ml.w > 0.f) base[1] = fmaxf(base[1], ml.y * p_.scale_log2);
    }
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    sum[0] = sum[1] = 0.f;
    for (int part = 0; part < pieces; ++part) {
      if (!ran(part)) continue;
      const float4* from = slot(first + part);
      const float4 ml = __ldcg(from + (kChunks - 1) * kThreads);
      // A piece's output is relative to 2^(its maximum x scale); a row that saw
      // no key there has a zero sum and adds nothing.
      const float f0 = ml.z > 0.f ? exp2_approx(fmaf(ml.x, p_.scale_log2, -base[0])) : 0.f;
      const float f1 = ml.w > 0.f ? exp2_approx(fmaf(ml.y, p_.scale_log2, -base[1])) : 0.f;
      sum[0] += ml.z * f0;
      sum[1] += ml.w * f1;
#pragma unroll
      for (int c = 0; c < D / 8; ++c) {
        const float4 v = __ldcg(from + c * kThreads);
        o[4 * c] += v.x * f0;
        o[4 * c + 1] += v.y * f0;
        o[4 * c + 2] += v.z * f1;
        o[4 * c + 3] += v.w * f1;
      }
    }
    return true;
  }

  // Item w's output, o x inv (the inverses of the rows' sums), into its rows
  // of the output, bf16.
  __device__ void store(const Sm90WsDesc& w, const float (&o)[D / 2], const float (&inv)[2]) const {
    if constexpr (Hook::skips_stores()) {
      return;
    } else if constexpr (F::kQuadStores) {
      // Lane q of a row's quad holds columns 8 dt + 2q, +1 for every dt. For
      // each group of four dt, two butterfly exchanges (lanes q ^ 1, then q ^ 2,
      // each swapping the two words whose index bit differs from q's)
      // transpose the quad's 4 x 4 words, so that lane q holds dt = 4g + q's
      // eight columns, 16 bytes. The shuffles run on every lane; only the
      // stores test the row.
      const bool bit0 = (lane_ & 1) != 0, bit1 = (lane_ & 2) != 0;
      const int q4 = lane_ % 4;
      // One exchange with lane ^ mask of the pair (a[lo], a[hi]): a lane whose
      // bit is set keeps a[hi] and takes the partner's a[hi] into a[lo].
      auto butterfly = [](uint32_t(&a)[4], bool bit, int mask, int lo, int hi) {
        const uint32_t got = __shfl_xor_sync(0xffffffffu, bit ? a[lo] : a[hi], mask);
        a[lo] = bit ? got : a[lo];
        a[hi] = bit ? a[hi] : got;
      };
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = w.m0 + warp_row0_ + lane_ / 4 + 8 * r;
        T* dst_row = out_ + (w.q_begin + row) * token_stride_ + w.head * D;
#pragma unroll
        for (int g = 0; g < D / 32; ++g) {
          uint32_t a[4];
#pragma unroll
          for (int i = 0; i < 4; ++i)
            a[i] = Elem<T>::pack(o[4 * (4 * g + i) + 2 * r] * inv[r], o[4 * (4 * g + i) + 2 * r + 1] * inv[r]);
          butterfly(a, bit0, 1, 0, 1);
          butterfly(a, bit0, 1, 2, 3);
          butterfly(a, bit1, 2, 0, 2);
          butterfly(a, bit1, 2, 1, 3);
          if (row < w.q_len) *reinterpret_cast<uint4*>(dst_row + 32 * g + 8 * q4) = make_uint4(a[0], a[1], a[2], a[3]);
        }
      }
    } else {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = w.m0 + warp_row0_ + lane_ / 4 + 8 * r;
        if (row >= w.q_len) continue;
        uint32_t* dst =
            reinterpret_cast<uint32_t*>(out_ + (w.q_begin + row) * token_stride_ + w.head * D + (lane_ % 4) * 2);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          dst[dt * 4] = Elem<T>::pack(o[4 * dt + 2 * r] * inv[r], o[4 * dt + 2 * r + 1] * inv[r]);
      }
    }
  }

 private:
  const PrefillParams& p_;
  const Sm90WsSchedule& sched_;
  const int ctid_, lane_ = ctid_ % 32, warp_row0_ = (ctid_ / 32) * 16;
  const int64_t token_stride_ = int64_t{p_.n_heads} * D;
  T* const out_ = static_cast<T*>(p_.out);
};

}  // namespace exactly::kernels::cuda
