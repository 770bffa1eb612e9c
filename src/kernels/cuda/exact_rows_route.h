// Which kernel exact_rows_attention runs for a batch of decode rows, as
// plain arithmetic the host checks (tests/kernels/exact_rows_route_test.cc):
// the device's facts and the batch's shape in, the kernel out. Every kernel
// gives the same bits; the route only decides the time.
#pragma once

#include <cstdint>

namespace exactly::kernels::cuda {

// A path the caller forces (engine-level comparisons), or kAuto.
enum class ExactRowsPath { kAuto, kOneKernel, kWindows, kCluster, kSplit };

enum class ExactRowsKernel { kSplit, kCluster, kPrefillKernel, kWindows, kOneKernel };

struct ExactRowsDevice {
  bool hopper = false;            // sm_90: the cluster path's and the split chain's producers' machine code
  int sms = 0;                    // streaming multiprocessors
  int64_t split_chain_slots = 0;  // split chain CTAs the GPU runs at once (its ring's shared memory decides)
};

struct ExactRowsShape {
  int64_t groups = 0;            // (sequence, KV head, 16 packed rows)
  int head_dim = 0;
  int max_seq_len = 0;           // keys of the longest sequence
  int cluster_ctas = 1;          // CTAs of a group's cluster at this context (one per 256-key window, at most 8)
  bool split_workspace = false;  // a workspace is given and holds what the split path needs
};

// Row groups below which a batch takes the windowed path. On an H100
// (exact_rows_lab, 640 keys, 32 layers) the windows took 0.657 against 0.791
// ms at 16 x 8 groups of Llama-3-8B and lost at 32 x 8 (1.247 against 1.088
// ms); for SmolLM2 the engine's step was faster with the windows at 64 x 3.
inline constexpr int64_t kWindowsBelowGroups = 256;

// The split path runs at most this many row groups over at most this many
// keys, where the caller gives it a workspace (exact_rows_workspace_bytes
// sizes one for them). Unforced, on sm_90, it takes kExactSplitAutoKeys keys
// or more while its chain's CTAs (one per kExactSplitChainCols columns of a
// group's O) all run at once. On an H100 (exact_rows_lab, 32 layers of
// Llama-3-8B, one producer warp) it took 0.44 ms against the cluster's 0.46
// at 1 x 1,024 keys (0.38 against 0.37 at 640), 1.03 against 1.36 at
// 1 x 4,096, 0.82 against the prefill kernel's 0.91 at 4 x 2,048, 1.85
// against the windows' 2.31 at 6 x 4,096 (48 groups, 384 chain CTAs); at
// 8 x 2,048 (512 chain CTAs, 396 at once) the windows won, 1.32 against
// 1.55. At head dim 64 (SmolLM2) one producer lost to the cluster up to
// about 3,000 keys; with two the engine took 931 against 891 tokens/s at
// batch 1 and 1,024 + 128 tokens, 851 against 742 at 2,048 + 128, 982
// against 989 at 512 + 128.
// From kExactSplitShortKeys keys it also runs where the clusters do not fit
// (SmolLM2, 16 sequences of 513-640 keys, 48 groups: the engine took 13,180
// against the windows' 12,404 tokens/s; at batch 1 the cluster kept its lead,
// 1,038 against 1,025).
inline constexpr int64_t kExactSplitMaxGroups = 64;
inline constexpr int kExactSplitMaxKeys = 16384;
inline constexpr int kExactSplitAutoKeys = 1024;
inline constexpr int kExactSplitShortKeys = 512;
inline constexpr int kExactSplitChainCols = 16;

inline bool split_allowed(const ExactRowsShape& s) {
  return s.split_workspace && s.groups <= kExactSplitMaxGroups && s.max_seq_len <= kExactSplitMaxKeys;
}

// Unforced, the split path runs on sm_90 over at least `keys` keys while its
// chain's CTAs all run at once.
inline bool split_pays(const ExactRowsShape& s, const ExactRowsDevice& d, int keys) {
  return split_allowed(s) && d.hopper && s.max_seq_len >= keys &&
         s.groups * (s.head_dim / kExactSplitChainCols) <= d.split_chain_slots;
}

// The cluster path while the row groups' clusters fit on the SMs at once
// (one CTA an SM): on an H100 (exact_rows_lab, 32 layers of Llama-3-8B) 0.370
// against 0.454 ms for the windows and 0.425 for the prefill kernel at
// 1 x 640 keys, 1.379 against 1.603 (prefill kernel) at 1 x 4,096, level with
// both at 4 x 640 (96 CTAs); past the SMs each cluster waits for a whole
// free group of them (8 x 640: 0.743 against the windows' 0.504).
inline bool cluster_pays(const ExactRowsShape& s, const ExactRowsDevice& d) {
  return d.hopper && s.cluster_ctas > 1 && s.groups * s.cluster_ctas <= d.sms;
}

// At head dim 128, up to 32 groups over contexts past 1,024 keys, the
// prefill kernel itself is faster than the windows (Llama-3-8B, 32 layers:
// 1.606 against 2.132 ms at 1 x 4,096, 1.635 against 2.206 at 4 x 4,096; at
// 8 x 4,096 the windows win, 2.477 against 3.327), and its bits are the
// ones to keep. Up to 1,024 keys the windows were faster in the engine's
// step (6.157 against 6.205 ms at 1 x 640), and at head dim 64 everywhere
// (SmolLM2 1 x 4,096: 1.454 against 1.617).
inline bool prefill_kernel_pays(const ExactRowsShape& s) {
  return s.head_dim == 128 && s.groups <= 32 && s.max_seq_len > 1024;
}

// A forced path is taken where it can run (the split path needs its
// workspace); otherwise the kernel is the one kernel over the rows.
inline ExactRowsKernel exact_rows_route(ExactRowsPath forced, const ExactRowsShape& s, const ExactRowsDevice& d) {
  if (forced != ExactRowsPath::kAuto) {
    if (forced == ExactRowsPath::kSplit && split_allowed(s)) return ExactRowsKernel::kSplit;
    if (forced == ExactRowsPath::kCluster) return ExactRowsKernel::kCluster;
    if (forced == ExactRowsPath::kWindows) return ExactRowsKernel::kWindows;
    return ExactRowsKernel::kOneKernel;
  }
  if (split_pays(s, d, kExactSplitAutoKeys)) return ExactRowsKernel::kSplit;
  if (cluster_pays(s, d)) return ExactRowsKernel::kCluster;
  if (split_pays(s, d, kExactSplitShortKeys)) return ExactRowsKernel::kSplit;
  if (prefill_kernel_pays(s)) return ExactRowsKernel::kPrefillKernel;
  if (s.groups < kWindowsBelowGroups) return ExactRowsKernel::kWindows;
  return ExactRowsKernel::kOneKernel;
}

}  // namespace exactly::kernels::cuda
