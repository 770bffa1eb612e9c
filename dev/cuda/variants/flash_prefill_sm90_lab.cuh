// The lab's side of the Hopper prefill kernel (production:
// flash_prefill_sm90_ws.cuh): its versions as bits, turned into the kernel's
// named features (LabFeatures) and into a hook (LabHook) for the timing
// ablations, the probe and the trace, which production does not carry.
#pragma once

#include "kernels/cuda/flash_prefill_sm90_ws.cuh"

namespace exactly::kernels::cuda {

// Each ablation makes the results wrong on purpose, except the probe and the
// trace, which only count, and the bits marked exact, which are features of
// the kernel (Sm90WsFeatures).
enum Sm90WsAblation : int {
  kSm90Exact = 0,
  kSm90NoFeedAfterFill = 1,     // K/V copied into the first stages only, then reused
  kSm90FeedEveryOtherTile = 2,  // half the copies (what multicast would save, without its coupling)
  kSm90QOnce = 4,               // each CTA's first item's Q reused for all its items
  kSm90NoSoftmax = 16,          // raw scores straight into P V
  kSm90Probe = 32,              // exact results; the consumers also count the cycles they wait (sm90_ws_probe)
  kSm90QShared = 128,           // exact: kQShared
  kSm90Trace = 16384,           // exact: each consumer warpgroup's first warp in CTA 0 stamps its steps (sm90_ws_trace)
  kSm90EarlyTests = 65536,      // exact: kEarlyTests
  kSm90NoStore = 131072,        // no output stored (what the epilogue's stores cost)
  kSm90QuadStores = 524288,     // exact: kQuadStores
  kSm90PackFirst = 1048576,     // exact: kPackFirst
  kSm90SplitRelease = 2097152,  // exact: kSplitRelease
};

template <int BN, int STAGES, int D = 128, int CLUSTER = 1, int BITS = kSm90Exact, int GROUP = 16, bool QTMA = false,
          int WG = 2, int ISSUERS = Sm90WsFeatures::kIssuers>
struct LabFeatures : Sm90WsFeatures {
  static constexpr int kHeadDim = D;
  static constexpr int kTileKeys = BN;
  static constexpr int kStages = STAGES;
  static constexpr int kIssuers = ISSUERS;
  static constexpr int kCopyKeys = GROUP;
  static constexpr int kCluster = CLUSTER;
  static constexpr int kConsumerWarpgroups = WG;
  static constexpr bool kQByTma = QTMA;
  static constexpr bool kQShared = (BITS & kSm90QShared) != 0;
  static constexpr bool kEarlyTests = (BITS & kSm90EarlyTests) != 0;
  static constexpr bool kPackFirst = (BITS & kSm90PackFirst) != 0;
  static constexpr bool kQuadStores = (BITS & kSm90QuadStores) != 0;
  static constexpr bool kSplitRelease = (BITS & kSm90SplitRelease) != 0;
};

// kSm90Probe launches add, over every consumer warp, the cycles spent waiting
// for K tiles [0] and for V tiles [1] in the steps inside an item, the same
// [2], [3] between items (an item's first tile, its last P V), and the warps'
// whole time [4].
__device__ unsigned long long sm90_ws_probe[5];

// kSm90Trace launches: for each consumer warpgroup of CTA 0 (its first
// warp), the clock at nine points of each of its first kSm90TraceSteps steps
// inside items: the step's start, K ready, the scores issued, O rescaled, V
// ready, P V issued, the scores done, both products done, P packed.
constexpr int kSm90TraceSteps = 512;
constexpr int kSm90TracePoints = 9;
__device__ long long sm90_ws_trace[2][kSm90TraceSteps][kSm90TracePoints];

// The kernel's hook (sm90_prefill/hook.cuh) for the bits that are not features.
template <int BITS>
struct LabHook {
  static constexpr bool kProbe = (BITS & kSm90Probe) != 0, kTrace = (BITS & kSm90Trace) != 0;
  __host__ __device__ static constexpr bool skips_copies(int g, int stages) {
    return (BITS & kSm90NoFeedAfterFill) != 0 ? g >= stages : (BITS & kSm90FeedEveryOtherTile) != 0 && (g & 1) != 0;
  }
  __host__ __device__ static constexpr bool keeps_first_q() { return (BITS & kSm90QOnce) != 0; }
  __host__ __device__ static constexpr bool skips_softmax() { return (BITS & kSm90NoSoftmax) != 0; }
  __host__ __device__ static constexpr bool skips_stores() { return (BITS & kSm90NoStore) != 0; }

  struct Record {
    long long start = 0;
    unsigned long long waited[4] = {0, 0, 0, 0};
    int between = 0;  // 2 while the steps between two items wait
    bool tracer = false;
    int warpgroup = 0, traced = 0;
  };
  __device__ static void begin(Record& r, int ctid) {
    if constexpr (kProbe) r.start = clock64();
    r.tracer = kTrace && blockIdx.x == 0 && ctid % 128 == 0;
    r.warpgroup = ctid / 128;
  }
  template <class Wait>
  __device__ static void wait(Record& r, bool v, Wait&& wait) {
    if constexpr (kProbe) {
      const long long t0 = clock64();
      wait();
      r.waited[r.between + v] += clock64() - t0;
    } else {
      wait();
    }
  }
  __device__ static void between_items(Record& r, bool between) {
    if constexpr (kProbe) r.between = between ? 2 : 0;
  }
  __device__ static void stamp(Record& r, int point) {
    if constexpr (kTrace) {
      if (r.tracer && r.traced < kSm90TraceSteps) sm90_ws_trace[r.warpgroup][r.traced][point] = clock64();
    }
  }
  __device__ static void step_done(Record& r) {
    if constexpr (kTrace) ++r.traced;
  }
  __device__ static void end(Record& r, int lane) {
    if constexpr (kProbe) {
      if (lane == 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i) atomicAdd(&sm90_ws_probe[i], r.waited[i]);
        atomicAdd(&sm90_ws_probe[4], static_cast<unsigned long long>(clock64() - r.start));
      }
    }
  }
};

}  // namespace exactly::kernels::cuda
