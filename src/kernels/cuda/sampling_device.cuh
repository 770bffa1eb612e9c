// The device half of sampling (sampling.h), shared by sample_rows and
// verify_drafts: one block of 1024 threads per row, making a handful of
// passes over the row, which stays in L2 (a 128k vocabulary is 500 KB, more
// than shared memory holds).
//
// Order. Logits become unsigned keys that order as the floats compare: -0
// folds into +0 (equal for the host) and NaN sits below -inf. The host's
// order, decreasing logit and then increasing id, is decreasing key then
// increasing id, and every set a filter keeps is a prefix of it: a `Cut`,
// the prefix's last key and its last id at that key. So are their
// intersections (the shorter prefix).
//
// Positions. "The first position in that order where the running weight
// reaches a target" answers top-k (weight 1 per token, target k), top-p
// (probability, target top_p of the total) and the draw (probability, target
// u of the total). A radix descent finds that position's key with four
// histograms of 8-bit digits; the tokens at one key share one probability,
// so how many of them are needed is a division, and which they are a scan in
// id order. (Weights that differ at one key, a residual's, take a weighted
// scan instead.)
//
// Mass. Probabilities are computed in double as the host computes them (exp
// of the difference to the largest logit, over the sum for the top-k
// survivors), then held in 64-bit fixed point, ceil(p 2^60). Integer sums do
// not depend on the order of addition, so the histograms take atomics and
// the result is the same on every run. Rounding up keeps a positive
// probability positive (the host's u = 0 picks the first such token); the
// error, under 2^-60 per token, is far below that of the host's double sums.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/sampling.h"

namespace exactly::kernels::cuda::sampling_device {

using u64 = unsigned long long;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
// 8-bit digits, four levels for a 32-bit key (the descent takes any width;
// 11 bits, three levels, measured slower on the H200).
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
constexpr int kBinsPerLane = kBins / 32;
constexpr int kLevels = (32 + kDigitBits - 1) / kDigitBits;
static_assert(kBins % 32 == 0, "warp 0 scans the bins, a lane per kBinsPerLane");
constexpr unsigned kFull = 0xffffffffu;
constexpr double kMassScale = 0x1p60;
static_assert(kWarps == 32, "the block's reductions and scans take one warp's worth of warps");

__device__ inline uint32_t key_of(float f) {
  if (f != f) return 0u;
  const uint32_t bits = f == 0.0f ? 0u : __float_as_uint(f);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

__device__ inline float float_of(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? key & 0x7fffffffu : ~key);
}

// The unnormalised probability of a logit, as the host computes it; NaN has none.
__device__ inline double weight_of(float l, double top) {
  return l != l ? 0.0 : exp(static_cast<double>(l) - top);
}

struct Cut {  // members: key > cut.key, or key == cut.key and id <= cut.id
  uint32_t key;
  int32_t id;
};
constexpr Cut kWholeRow{0u, INT32_MAX};

__device__ inline Cut shorter(Cut a, Cut b) { return a.key > b.key || (a.key == b.key && a.id < b.id) ? a : b; }

struct Shared {
  u64 mass[kBins];
  unsigned count[kBins];
  u64 scratch[kWarps];
  double scratch_f64[kWarps];
  // What one thread found, for all.
  uint32_t key;
  u64 above, target, at_key;
  unsigned ties;
  int found;
  int warp;
  u64 rank;
  int id;
};

// The tokens a pass walks, by position in id order: the whole row (the
// position is the id), or the top-k survivors gathered into the workspace.
struct View {
  float* logits;
  const int32_t* ids;  // null: the position is the id
  int n;
  __device__ int id(int j) const { return ids != nullptr ? ids[j] : j; }
};

__device__ inline bool inside(Cut c, uint32_t key, const View& v, int j) {
  return key > c.key || (key == c.key && v.id(j) <= c.id);
}

// Each warp owns a contiguous segment of the positions and reads it 32 at a
// time, with the loop uniform across the warp (for ballots and shuffles): id
// order is warp order, then batch order, then lane order. The logits of a
// few batches are loaded before any is used, to keep loads in flight.
constexpr int kUnroll = 4;

__device__ inline int segment_length(int n) { return ((n + kWarps - 1) / kWarps + 31) / 32 * 32; }

template <typename Fn>
__device__ void for_view(const View& v, Fn&& fn) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int len = segment_length(v.n), begin = warp * len, end = min(v.n, begin + len);
  for (int base = begin; base < end; base += 32 * kUnroll) {
    float l[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = base + 32 * u + lane;
      l[u] = j < end ? v.logits[j] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) fn(base + 32 * u + lane, base + 32 * u + lane < end, l[u]);
  }
}

struct Add {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct Min {
  template <typename T>
  __device__ T operator()(T a, T b) const { return a < b ? a : b; }
};

// Over the block in a fixed order: a shuffle tree within each warp, then one
// over the warps' results (floating-point sums come out the same every run).
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(kFull, v, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = scratch[lane];
    for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(kFull, v, offset));
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  const T total = scratch[0];
  __syncthreads();  // scratch may be reused by the next reduction
  return total;
}

// Repetition penalty, then frequency and presence penalties, with the host's
// float operations one by one; the frequency term is one fused multiply-add,
// as the host spells it (std::fma), so no compiler's contraction decides.
__device__ inline void apply_penalties(float* row, int vocab, const SampleRowParams& p, const PenaltyEntry* entries) {
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool frequency = p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (!repetition && !frequency) return;
  for (int64_t e = int64_t{max(p.penalty_begin, 0)} + threadIdx.x; e < p.penalty_end; e += kThreads) {
    const PenaltyEntry t = entries[e];
    if (t.id < 0 || t.id >= vocab) continue;
    float l = row[t.id];
    if (repetition && t.in_window != 0)
      l = l > 0.0f ? __fdiv_rn(l, p.repetition_penalty) : __fmul_rn(l, p.repetition_penalty);
    if (frequency && t.output_count > 0)
      l = __fsub_rn(l, __fmaf_rn(p.frequency_penalty, __int2float_rn(t.output_count), p.presence_penalty));
    row[t.id] = l;
  }
}

// Adds one weight per lane to its digit's bin. Lanes that share a bin are
// summed first: logits bunch into a few bins, and one atomic per lane would
// queue the warp on one address. Integer sums, so in any order.
__device__ inline void histogram_add(Shared& s, bool take, unsigned bin, u64 w, bool with_mass) {
  if (__ballot_sync(kFull, take) == 0) return;  // most batches past the first digit
  const unsigned peers = __match_any_sync(kFull, take ? bin : static_cast<unsigned>(kBins));
  if (!take) return;
  const bool leader = static_cast<int>(threadIdx.x % 32) == __ffs(static_cast<int>(peers)) - 1;
  if (with_mass) {  // 21-bit pieces: 32 of them sum within 32 bits (w <= 2^60)
    const u64 lo = __reduce_add_sync(peers, static_cast<unsigned>(w & 0x1fffffu));
    const u64 mid = __reduce_add_sync(peers, static_cast<unsigned>((w >> 21) & 0x1fffffu));
    const u64 hi = __reduce_add_sync(peers, static_cast<unsigned>(w >> 42));
    if (leader) atomicAdd(&s.mass[bin], lo + (mid << 21) + (hi << 42));
  }
  if (leader) atomicAdd(&s.count[bin], static_cast<unsigned>(__popc(static_cast<int>(peers))));
}

struct Crossing {
  bool found;
  uint32_t key;   // the key of the position
  unsigned take;  // it is the take-th member at that key in id order (kEqualAtKey)
  unsigned ties;  // members at that key
  u64 above;      // the weight of the members above that key
  u64 target;     // the running weight to reach
};

// The first position, over the members of `member` in decreasing key then
// increasing id, where the running weight reaches target_of(total weight)
// (0: unreachable). Weights: mass[j] with kMass, else 1 per token. With
// kEqualAtKey (tokens of one key weigh the same) it also says which of the
// tokens at its key the position is.
template <bool kMass, bool kEqualAtKey = true, typename TargetOf>
__device__ Crossing descend(Shared& s, const View& v, const u64* mass, Cut member, TargetOf target_of) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t prefix = 0;
  u64 above = 0, target = 0;
  for (int level = 0; level < kLevels; ++level) {
    for (int b = threadIdx.x; b < kBins; b += kThreads) s.mass[b] = 0, s.count[b] = 0;
    __syncthreads();
    const int top = 32 - kDigitBits * level, shift = max(top - kDigitBits, 0), width = top - shift;
    const uint32_t high = top == 32 ? 0u : ~0u << top;
    const uint32_t digit_mask = (1u << width) - 1;
    for_view(v, [&](int j, bool valid, float l) {
      const uint32_t key = key_of(l);
      const bool take = valid && (key & high) == (prefix & high) && inside(member, key, v, j);
      histogram_add(s, take, (key >> shift) & digit_mask, take && kMass ? mass[j] : 1, kMass);
    });
    __syncthreads();
    if (warp == 0) {
      // Lane l holds bins kBins-1 - kBinsPerLane l downwards: lanes in decreasing digit order.
      const int top_bin = kBins - 1 - kBinsPerLane * lane;
      auto bin_weight = [&](int b) -> u64 { return kMass ? s.mass[b] : s.count[b]; };
      u64 local = 0;
      for (int j = 0; j < kBinsPerLane; ++j) local += bin_weight(top_bin - j);
      u64 running = local;
      for (int offset = 1; offset < 32; offset <<= 1) {
        const u64 x = __shfl_up_sync(kFull, running, offset);
        if (lane >= offset) running += x;
      }
      if (level == 0) {
        const u64 total = __shfl_sync(kFull, running, 31);
        target = target_of(total);
        if (target > total) target = 0;
      }
      const unsigned hit = target != 0 ? __ballot_sync(kFull, above + running >= target) : 0u;
      if (lane == 0) s.found = hit != 0;
      if (hit != 0 && lane == __ffs(static_cast<int>(hit)) - 1) {
        u64 cum = above + running - local;
        int b = top_bin;
        while (cum + bin_weight(b) < target) cum += bin_weight(b--);
        s.key = prefix | static_cast<uint32_t>(b) << shift;
        s.above = cum;
        s.at_key = bin_weight(b);
        s.ties = s.count[b];
        s.target = target;
      }
    }
    __syncthreads();
    if (!s.found) return {false, 0u, 0u, 0u, 0, 0};
    prefix = s.key, above = s.above, target = s.target;
  }
  const unsigned ties = s.ties;
  if constexpr (kEqualAtKey) {
    // The tokens at the key weigh the same (same logit): count how many reach the target.
    const u64 each = s.at_key / ties;
    return {true, prefix, static_cast<unsigned>((target - above + each - 1) / each), ties, above, target};
  } else {
    return {true, prefix, 0u, ties, above, target};
  }
}

// Per warp, how many of its positions pass `hit`, then where each warp's
// start in id order: s.scratch[w] becomes warp w's offset, s.rank the total.
template <typename Hit>
__device__ void count_by_warp(Shared& s, const View& v, Hit&& hit) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned hits = 0;
  for_view(v, [&](int j, bool valid, float l) {
    hits += __popc(static_cast<int>(__ballot_sync(kFull, hit(j, valid, l))));
  });
  if (lane == 0) s.scratch[warp] = hits;
  __syncthreads();
  if (threadIdx.x == 0) {
    u64 total = 0;
    for (int w = 0; w < kWarps; ++w) {
      const u64 c = s.scratch[w];
      s.scratch[w] = total;
      total += c;
    }
    s.rank = total;
  }
  __syncthreads();
}

// The id of the n-th member (1-based, in id order) whose key is `key`.
__device__ inline int nth_at_key(Shared& s, const View& v, Cut member, uint32_t key, unsigned n) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto hit = [&](int j, bool valid, float l) { return valid && key_of(l) == key && inside(member, key, v, j); };
  count_by_warp(s, v, hit);
  // The warp holding the n-th: the last whose offset is below n.
  const bool mine = s.scratch[warp] < n && (warp == kWarps - 1 || s.scratch[warp + 1] >= n);
  if (mine) {
    unsigned rank = n - static_cast<unsigned>(s.scratch[warp]);
    const int len = segment_length(v.n), begin = warp * len, end = min(v.n, begin + len);
    for (int base = begin; base < end; base += 32) {
      const int j = base + lane;
      unsigned bits = __ballot_sync(kFull, j < end && hit(j, true, v.logits[j]));
      const auto c = static_cast<unsigned>(__popc(static_cast<int>(bits)));
      if (rank <= c) {
        for (unsigned k = 1; k < rank; ++k) bits &= bits - 1;
        if (lane == __ffs(static_cast<int>(bits)) - 1) s.id = v.id(j);
        break;
      }
      rank -= c;
    }
  }
  __syncthreads();
  const int id = s.id;
  __syncthreads();  // s.scratch and s.id may be reused at once
  return id;
}

// The members of `member` gathered in id order into `space` (mass first, then
// ids, then logits; 16 bytes a member), for the passes that follow top-k.
__device__ inline View gather(Shared& s, const View& v, Cut member, void* space) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto hit = [&](int j, bool valid, float l) { return valid && inside(member, key_of(l), v, j); };
  count_by_warp(s, v, hit);
  const int n = static_cast<int>(s.rank);
  auto* ids = reinterpret_cast<int32_t*>(static_cast<char*>(space) + 8 * int64_t{n});
  auto* logits = reinterpret_cast<float*>(static_cast<char*>(space) + 12 * int64_t{n});
  auto at = static_cast<unsigned>(s.scratch[warp]);
  for_view(v, [&](int j, bool valid, float l) {
    const bool h = hit(j, valid, l);
    const unsigned bits = __ballot_sync(kFull, h);
    if (h) {
      const unsigned k = at + static_cast<unsigned>(__popc(static_cast<int>(bits & ((1u << lane) - 1))));
      ids[k] = v.id(j), logits[k] = l;
    }
    at += static_cast<unsigned>(__popc(static_cast<int>(bits)));
  });
  __syncthreads();  // the gathered list is read by every thread next
  return {logits, ids, n};
}

// A gathered view as gather() left it in `space`.
__device__ inline View gathered_view(void* space, int n) {
  return {reinterpret_cast<float*>(static_cast<char*>(space) + 12 * int64_t{n}),
          reinterpret_cast<const int32_t*>(static_cast<char*>(space) + 8 * int64_t{n}), n};
}

// Where the draw lands: the first position whose running mass exceeds
// u * total, i.e. reaches floor(u * total) + 1; 0 when none does.
__device__ inline u64 draw_target(double u, u64 total) {
  if (!(u < 1.0)) return 0;
  const u64 t = static_cast<u64>(u > 0.0 ? u * static_cast<double>(total) : 0.0) + 1;
  return t <= total ? t : 0;
}

// The smallest prefix whose mass reaches top_p of the total; 0 when none does.
__device__ inline u64 top_p_target(float top_p, u64 total) {
  const double x = static_cast<double>(top_p) * static_cast<double>(total);
  const u64 t = x > 1.0 ? static_cast<u64>(ceil(x)) : 1;
  return t <= total ? t : 0;
}

// The first position in id order where the running weight, weight_at(j,
// valid, logit) per position, reaches target_of(total weight): a scan of the
// warps' sums, then of one warp's segment. -1 when the target is 0.
template <typename WeightAt, typename TargetOf>
__device__ int first_reaching_in_id_order(Shared& s, const View& v, WeightAt&& weight_at, TargetOf&& target_of) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  u64 sum = 0;
  for_view(v, [&](int j, bool valid, float l) { sum += weight_at(j, valid, l); });
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(kFull, sum, offset);
  if (lane == 0) s.scratch[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    u64 total = 0;
    for (int w = 0; w < kWarps; ++w) total += s.scratch[w];
    const u64 target = target_of(total);
    int w = -1;
    if (target != 0) {
      u64 cum = 0;
      for (w = 0; cum + s.scratch[w] < target; ++w) cum += s.scratch[w];
      s.rank = target - cum;
    }
    s.warp = w;
  }
  __syncthreads();
  const int chosen = s.warp;
  if (warp == chosen) {
    u64 need = s.rank;
    const int len = segment_length(v.n), begin = warp * len, end = min(v.n, begin + len);
    for (int base = begin; base < end; base += 32) {
      const int j = base + lane;
      u64 running = j < end ? weight_at(j, true, v.logits[j]) : 0;
      for (int offset = 1; offset < 32; offset <<= 1) {
        const u64 x = __shfl_up_sync(kFull, running, offset);
        if (lane >= offset) running += x;
      }
      const unsigned hit = __ballot_sync(kFull, running >= need);
      if (hit != 0) {
        if (lane == __ffs(static_cast<int>(hit)) - 1) s.id = v.id(j);
        break;
      }
      need -= __shfl_sync(kFull, running, 31);
    }
  }
  __syncthreads();
  const int id = chosen >= 0 ? s.id : -1;
  __syncthreads();
  return id;
}

// The draw in id order (no top-k or top-p). -1 when rounding leaves u past
// the last token.
__device__ inline int draw_in_id_order(Shared& s, const View& v, const u64* mass, Cut member, double u) {
  auto mass_at = [&](int j, bool valid, float l) -> u64 {
    return valid && inside(member, key_of(l), v, j) ? mass[j] : 0;
  };
  return first_reaching_in_id_order(s, v, mass_at, [u](u64 total) { return draw_target(u, total); });
}

// The last member in the order the draw walks, among those of positive mass
// when `positive` is given: the host's fallback when rounding leaves the
// uniform past the last token's share.
__device__ inline int last_member(Shared& s, const View& v, Cut member, bool sorted, const u64* positive = nullptr) {
  u64 last = 0;
  for_view(v, [&](int j, bool valid, float l) {
    const uint32_t key = key_of(l);
    if (valid && inside(member, key, v, j) && (positive == nullptr || positive[j] != 0))
      last = max(last, (sorted ? u64{~key} << 32 : 0) | static_cast<u64>(v.id(j)));
  });
  return static_cast<int>(block_reduce(last, Max{}, s.scratch) & 0xffffffffu);
}

// A row after the host sampler's steps up to the draw.
struct ProcessedRow {
  bool degenerate;  // greedy, or no finite largest logit: the row's token is top_id
  uint32_t top_key;
  int top_id;
  bool sorted;      // draws walk decreasing logit then increasing id, else id order (not degenerate)
  View view;        // the positions the later passes walk
  Cut kept;         // what every filter kept
  double sum;       // the softmax denominator over the top-k survivors
};

// Penalties, temperature, top-k, softmax, min-p and top-p over `row`, which
// is overwritten with the processed logits. `space` (vocab u64) receives the
// survivors' masses by position in the view (after the gathered top-k, when
// the view is that). The result goes to then(row), called by every thread,
// rather than being returned: returned, it cost sample_kernel registers
// (spills), where this way its code is what it was as one function.
template <typename Then>
__device__ void process_row(Shared& s, float* row, int vocab, const SampleRowParams& p,
                            const PenaltyEntry* penalties, u64* space, Then&& then) {
  apply_penalties(row, vocab, p, penalties);
  __syncthreads();

  // Temperature (the host's greedy path returns before it) and the largest
  // logit, the lowest id among equals.
  const View whole{row, nullptr, vocab};
  const bool greedy = p.temperature <= 0.0f;
  u64 best = 0;
  for_view(whole, [&](int j, bool valid, float l) {
    if (!valid) return;
    if (!greedy) row[j] = l = __fdiv_rn(l, p.temperature);
    best = max(best, u64{key_of(l)} << 32 | ~static_cast<uint32_t>(j));
  });
  best = block_reduce(best, Max{}, s.scratch);
  const auto top_key = static_cast<uint32_t>(best >> 32);
  const auto top_id = static_cast<int>(~static_cast<uint32_t>(best));
  const float top = float_of(top_key);
  if (greedy || !isfinite(top)) {
    then(ProcessedRow{true, top_key, top_id, false, whole, kWholeRow, 0.0});
    return;
  }
  const bool sorted = p.top_k > 0 || p.top_p < 1.0f;

  // top-k: exactly k tokens, the lowest ids among those tied at the threshold.
  // When they are at most half the row, the passes that follow walk them alone.
  Cut k_cut = kWholeRow;
  View view = whole;
  if (p.top_k > 0 && p.top_k < vocab) {
    const auto k = static_cast<u64>(p.top_k);
    const Crossing c = descend<false>(s, whole, nullptr, kWholeRow, [k](u64) { return k; });
    k_cut = {c.key, c.take < c.ties ? nth_at_key(s, whole, kWholeRow, c.key, c.take) : INT32_MAX};
    if (2 * k <= static_cast<u64>(vocab)) view = gather(s, whole, k_cut, space);
  }
  u64* mass = space;  // by position in the view

  // Softmax over the survivors, in double; their probabilities in fixed point.
  // The exponentials are kept in the masses' place until the sum is known.
  const double top_d = top;
  auto* weight = reinterpret_cast<double*>(mass);
  double sum = 0.0;
  for_view(view, [&](int j, bool valid, float l) {
    if (!valid || !inside(k_cut, key_of(l), view, j)) return;
    const double w = weight_of(l, top_d);
    weight[j] = w;
    sum += w;
  });
  sum = block_reduce(sum, Add{}, s.scratch_f64);
  // min-p: the most likely token's probability is exp(0) / sum, as the host computes it.
  const double min_p_floor = (1.0 / sum) * static_cast<double>(p.min_p);
  u64 lowest_kept = ~u64{0};
  for_view(view, [&](int j, bool valid, float l) {
    const uint32_t key = key_of(l);
    if (!valid || !inside(k_cut, key, view, j)) return;
    const double prob = weight[j] / sum;  // the same thread wrote it
    mass[j] = __double2ull_ru(prob * kMassScale);
    if (!(prob < min_p_floor)) lowest_kept = min(lowest_kept, u64{key});
  });
  __syncthreads();  // the masses are read by other threads next
  Cut min_p_cut = kWholeRow;
  if (p.min_p > 0.0f) {
    lowest_kept = block_reduce(lowest_kept, Min{}, s.scratch);
    // Probability grows with the logit, so what min-p keeps is a prefix too.
    min_p_cut = lowest_kept != ~u64{0} ? Cut{static_cast<uint32_t>(lowest_kept), INT32_MAX} : Cut{top_key, top_id};
  }

  // top-p: the smallest prefix of the top-k survivors whose mass reaches top_p.
  Cut p_cut = kWholeRow;
  if (p.top_p < 1.0f) {
    const float top_p = p.top_p;
    const Crossing c =
        descend<true>(s, view, mass, k_cut, [top_p](u64 total) { return top_p_target(top_p, total); });
    if (c.found) p_cut = {c.key, c.take < c.ties ? nth_at_key(s, view, k_cut, c.key, c.take) : INT32_MAX};
  }

  // The draw is over what every filter kept, renormalised by its own total.
  then(ProcessedRow{false, top_key, top_id, sorted, view, shorter(k_cut, shorter(p_cut, min_p_cut)), sum});
}

// The draw with uniform u from a processed row whose masses are `mass` (by
// position in its view): sample_rows' token. With `positive_fallback`,
// rounding past the last token falls back to the last of positive mass (the
// host's draw_from) rather than the last survivor (Sampler::draw).
__device__ inline int draw_row(Shared& s, const ProcessedRow& r, const u64* mass, double u,
                               bool positive_fallback = false) {
  if (r.degenerate) return r.top_id;
  int token = -1;
  if (r.sorted) {
    const Crossing c = descend<true>(s, r.view, mass, r.kept, [u](u64 total) { return draw_target(u, total); });
    if (c.found) token = nth_at_key(s, r.view, r.kept, c.key, c.take);
  } else {
    token = draw_in_id_order(s, r.view, mass, r.kept, u);
  }
  if (token < 0) token = last_member(s, r.view, r.kept, r.sorted, positive_fallback ? mass : nullptr);
  return token;
}

}  // namespace exactly::kernels::cuda::sampling_device
