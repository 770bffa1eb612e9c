// Products with up to 64 rows (decode steps) in the canonical order: each
// output is one fp32 accumulator fed by tensor-core k16 steps from k = 0
// upwards, the order of cuBLASLt's kernels without split-K (gemm.h), so a
// row's bits do not depend on the number of rows or on which kernel ran.
//
// Reading the weight once at the memory's speed is all that matters at these
// sizes, and a sum that may not be split makes each output a chain of k / 16
// dependent steps. So the weight rows go on wgmma's M side, 64 to a
// warpgroup, whose chained steps issue back to back, and the few input rows
// on its N side (8 to 64). A producer warp streams 64-row weight tiles and the
// input rows with the tensor memory accelerator into a ring of stages
// (128-byte swizzle, completion on mbarriers); the consumer warpgroup runs its
// tile's whole k. CTAs are persistent, one per SM, each over an equal share of
// the tiles. Under dependent launch the producer starts streaming weights
// before the kernel ahead has finished (weights are never written).
//
// Whole tiles per CTA leave SMs idle in the last round (448 tiles on 132 SMs
// is 3.4 rounds of 4), so a CTA's share is an equal run of (tile, k-stage)
// steps instead. A tile cut between two CTAs keeps its one chain: the CTA
// with the tile's first stages runs them before anything else and leaves its
// accumulators in a hand-off slot; the next CTA runs the tile's last stages
// after all its own work, continuing from those accumulators (fp32 values
// moved, not re-rounded), so the bits are those of an uncut tile.
#include "kernels/cuda/gemm_rows.h"

#include <cuda.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/tma_primitives.cuh"
#include "kernels/cuda/wgmma_kk.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"

namespace exactly::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kTileRows = 64;  // weight rows per tile: wgmma's M
constexpr int kWeightPanelBytes = kTileRows * 128;
constexpr int kSharedBudget = 200 * 1024;  // bytes of stages per CTA: one CTA per SM, many bytes in flight

enum class OutKind : int { kBf16 = 0, kF32 = 1, kF32Add = 2 };

// N input rows (a multiple of 8) on wgmma's N side; stages of P 64-column
// panels of k (k a multiple of 64 P: a stage is never partial, so the
// consumer's steps are one unrolled sequence).
template <int N, int P>
struct RowsShape {
  static constexpr int kStageK = 64 * P;
  static constexpr int kWeightBytes = P * kWeightPanelBytes;
  static constexpr int kInputPanelBytes = N * 128;
  static constexpr int kStageBytes = kWeightBytes + P * kInputPanelBytes;
  static constexpr int kMaxStages = 32 / P;
  static constexpr int kStages =
      kSharedBudget / kStageBytes < kMaxStages ? kSharedBudget / kStageBytes : kMaxStages;
  static constexpr int kSharedBytes = kStages * kStageBytes + 1024;  // + alignment slack
  static constexpr int kThreads = 128 + 32;                          // a consumer warpgroup, a producer warp
  static_assert(kStages >= 2, "stages do not fit");
};

// The k16 steps of a stage, in order; the first overwrites the accumulators
// unless `accumulate`.
template <int N, int P>
__device__ __forceinline__ void issue_steps(float (&acc)[N / 2], uint64_t w_desc, uint64_t x_desc, bool accumulate) {
#ifdef EXACTLY_HAS_WGMMA
#pragma unroll
  for (int j = 0; j < 4 * P; ++j) {
    const uint32_t step = static_cast<uint32_t>((j % 4) * 32);
    wgmma_kk<N>(acc, wgmma_descriptor_advance(w_desc, (j / 4) * kWeightPanelBytes + step),
                wgmma_descriptor_advance(x_desc, (j / 4) * RowsShape<N, P>::kInputPanelBytes + step),
                accumulate || j > 0);
  }
#endif
}

constexpr int kMaxGrid = 256;  // CTAs of a launch: one per SM, at most this many

// Hand-off slots, one per CTA: slot b holds the accumulators that CTA b - 1
// leaves for CTA b (128 threads x at most 32 values), and its flag. A flag is
// set by one CTA and cleared by the next within a launch, so launches in one
// stream share them; launches on two streams at once would not.
__device__ float handoff_values[kMaxGrid * 32 * 128];
__device__ unsigned handoff_ready[kMaxGrid];

#ifdef EXACTLY_HAS_WGMMA
// A CTA's share: the steps [begin, end) of the weight's tiles x k-stages,
// run as up to three segments: the first stages of the tile that `end` cuts
// (handed off), the whole tiles, then the last stages of the tile that
// `begin` cuts (continued). A share is at least one tile long (the grid has
// no more CTAs than tiles), so the two cut tiles differ.
struct Segment {
  int tile, ks_begin, ks_end;
  __device__ int stages() const { return ks_end - ks_begin; }
};

struct StepShare {
  int k_stages, begin, end;
  __device__ StepShare(int tiles, int k_stages_) : k_stages(k_stages_) {
    const int64_t total = int64_t{tiles} * k_stages;
    begin = static_cast<int>(total * blockIdx.x / gridDim.x);
    end = static_cast<int>(total * (blockIdx.x + 1) / gridDim.x);
  }
  __device__ int whole_first() const { return (begin + k_stages - 1) / k_stages; }
  __device__ int whole_end() const { return end / k_stages; }
  __device__ int segments() const { return 2 + (whole_end() - whole_first()); }  // with empty ones
  // Segment i: 0 the handed-off head, 1 .. n the whole tiles, n + 1 the tail.
  __device__ Segment segment(int i) const {
    const int wf = whole_first(), we = whole_end();
    if (i == 0) return {we, 0, end - we * k_stages};
    if (i <= we - wf) return {wf + i - 1, 0, k_stages};
    return {begin / k_stages, begin % k_stages, begin % k_stages == 0 ? 0 : k_stages};
  }
};
#endif

#ifdef EXACTLY_HAS_WGMMA
// The consumer warpgroup's accumulators into slot blockIdx.x + 1, then its
// flag (release: every thread's values are visible before the flag is).
template <int N>
__device__ __forceinline__ void hand_off_accumulators(const float (&acc)[N / 2]) {
  float* slot = handoff_values + int64_t{blockIdx.x + 1} * 32 * 128;
#pragma unroll
  for (int j = 0; j < N / 2; ++j) __stcg(slot + j * 128 + threadIdx.x, acc[j]);
  __threadfence();
  asm volatile("bar.sync 1, 128;\n" ::: "memory");
  if (threadIdx.x == 0)
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(handoff_ready + blockIdx.x + 1), "r"(1u) : "memory");
}

// Waits for slot blockIdx.x's flag, clears it for the next launch and reads
// the accumulators the previous CTA left there.
template <int N>
__device__ __forceinline__ void resume_accumulators(float (&acc)[N / 2]) {
  if (threadIdx.x == 0) {
    unsigned ready = 0;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(ready) : "l"(handoff_ready + blockIdx.x) : "memory");
      if (ready) break;
      __nanosleep(64);
    }
    handoff_ready[blockIdx.x] = 0;
    __threadfence();
  }
  asm volatile("bar.sync 1, 128;\n" ::: "memory");
  const float* slot = handoff_values + int64_t{blockIdx.x} * 32 * 128;
#pragma unroll
  for (int j = 0; j < N / 2; ++j) acc[j] = __ldcg(slot + j * 128 + threadIdx.x);
}
#endif

template <int N, int P>
__global__ void __launch_bounds__(RowsShape<N, P>::kThreads, 1)
    gemm_rows_kernel(const __grid_constant__ CUtensorMap w_map, const __grid_constant__ CUtensorMap x_map, void* out,
                     int m, int n_out, int k, int out_kind) {
  using S = RowsShape<N, P>;
#ifdef EXACTLY_HAS_WGMMA
  extern __shared__ uint8_t shared_raw[];
  __shared__ __align__(8) uint64_t full[S::kStages], empty[S::kStages];
  const uint32_t base = (smem_address(shared_raw) + 1023u) & ~1023u;
  auto weights_at = [&](int slot) { return base + static_cast<uint32_t>(slot * S::kStageBytes); };
  auto inputs_at = [&](int slot) { return weights_at(slot) + S::kWeightBytes; };

  const StepShare share((n_out + kTileRows - 1) / kTileRows, k / S::kStageK);
  const int iterations = share.end - share.begin;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      mbarrier_init(smem_address(&full[s]), 1);
      mbarrier_init(smem_address(&empty[s]), 1);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  release_dependents();

  if (threadIdx.x >= 128) {  // the producer warp; one lane issues
    if (threadIdx.x != 128) return;
    // The CTA's steps in the consumer's order: (tile, k-stage) of step `it`.
    int seg = 0, seg_first = 0;
    Segment cur = share.segment(0);
    auto step = [&](int it, int& tile, int& ks) {
      while (it - seg_first >= cur.stages()) seg_first += cur.stages(), cur = share.segment(++seg);
      tile = cur.tile, ks = cur.ks_begin + (it - seg_first);
    };
    // Rows of the weight past n_out (in its last tile) read as zeros.
    auto issue_weights = [&](int it, int ks, int tile) {
      const int slot = it % S::kStages;
      const uint32_t bar = smem_address(&full[slot]);
      mbarrier_arrive_expect_tx(bar, static_cast<uint32_t>(S::kStageBytes));
      for (int p = 0; p < P; ++p)
        tma_load_2d(weights_at(slot) + p * kWeightPanelBytes, &w_map, ks * S::kStageK + p * 64, tile * kTileRows,
                    bar);
    };
    auto issue_inputs = [&](int it, int ks) {
      const int slot = it % S::kStages;
      for (int p = 0; p < P; ++p)
        tma_load_2d(inputs_at(slot) + p * S::kInputPanelBytes, &x_map, ks * S::kStageK + p * 64, 0,
                    smem_address(&full[slot]));
    };
    const int early = min(iterations, S::kStages);
    int tile = 0, ks = 0;
    for (int it = 0; it < early; ++it) {  // weights are never written: no need to wait
      step(it, tile, ks);
      issue_weights(it, ks, tile);
    }
    wait_for_predecessor();
    seg = 0, seg_first = 0, cur = share.segment(0);
    for (int it = 0; it < early; ++it) {
      step(it, tile, ks);
      issue_inputs(it, ks);
    }
    for (int it = early; it < iterations; ++it) {
      step(it, tile, ks);
      mbarrier_wait(smem_address(&empty[it % S::kStages]), ((it / S::kStages) & 1) ^ 1);
      issue_weights(it, ks, tile);
      issue_inputs(it, ks);
    }
    return;
  }

  wait_for_predecessor();  // the epilogue reads and writes `out`
  const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, c = threadIdx.x % 4;
  int it = 0;  // the CTA's step, as the producer counts them
  // A segment's stages on acc: from zero, or continuing acc's values.
  auto run_stages = [&](float(&acc)[N / 2], int stages, bool continuing) {
    for (int s = 0; s < stages; ++s, ++it) {
      const int slot = it % S::kStages;
      mbarrier_wait(smem_address(&full[slot]), (it / S::kStages) & 1);
      const uint64_t w_desc = wgmma_descriptor(weights_at(slot), kWeightPanelBytes, 1024);
      const uint64_t x_desc = wgmma_descriptor(inputs_at(slot), S::kInputPanelBytes, 1024);
      wgmma_keep(acc);
      wgmma_fence();
      issue_steps<N, P>(acc, w_desc, x_desc, continuing || s > 0);
      wgmma_commit();
      // The stage before this one is done once at most this stage's group is
      // in flight: release it.
      wgmma_wait<1>();
      if (s > 0 && threadIdx.x == 0) mbarrier_arrive(smem_address(&empty[(it - 1) % S::kStages]));
    }
    wgmma_wait<0>();
    wgmma_keep(acc);
    if (threadIdx.x == 0) mbarrier_arrive(smem_address(&empty[(it - 1) % S::kStages]));
  };
  auto store = [&](const float(&acc)[N / 2], int tile) {
    const int rows = min(kTileRows, n_out - tile * kTileRows);
#pragma unroll
    for (int j = 0; j < N / 2; ++j) {
      const int local = 16 * warp + g + ((j % 4) >= 2 ? 8 : 0);
      const int row = tile * kTileRows + local;
      const int token = 8 * (j / 4) + 2 * c + (j % 2);
      if (local >= rows || row >= n_out || token >= m) continue;
      const int64_t at = int64_t{token} * n_out + row;
      if (out_kind == static_cast<int>(OutKind::kBf16)) {
        static_cast<bf16*>(out)[at] = __float2bfloat16_rn(acc[j]);
      } else {
        float* o = static_cast<float*>(out) + at;
        *o = out_kind == static_cast<int>(OutKind::kF32Add) ? __fadd_rn(*o, acc[j]) : acc[j];
      }
    }
  };
  // Each kind of segment has its own copy of the stage loop, so that no
  // accumulator has two definitions merging ahead of a wgmma (ptxas would
  // serialize every wgmma of the kernel).
  if (const Segment head = share.segment(0); head.stages() > 0) {
    float acc[N / 2] = {};
    run_stages(acc, head.stages(), false);
    hand_off_accumulators<N>(acc);
  }
  for (int si = 1; si + 1 < share.segments(); ++si) {
    float acc[N / 2] = {};
    run_stages(acc, share.k_stages, false);
    store(acc, share.segment(si).tile);
  }
  if (const Segment tail = share.segment(share.segments() - 1); tail.stages() > 0) {
    float acc[N / 2];
    resume_accumulators<N>(acc);
    run_stages(acc, tail.stages(), true);
    store(acc, tail.tile);
  }
#else
  static_assert(S::kStageK > 0 && S::kSharedBytes > 0 && S::kThreads > 0);  // sm_80: wgmma is not there
  (void)handoff_values, (void)handoff_ready;
#endif
}

// Tensor maps of weights are made once per (address, shape); those of the
// inputs per (address, rows, shape), as decode graphs replay the same few.
struct MapKey {
  const void* p;
  int64_t rows, cols;
  uint32_t box_rows;
  bool operator==(const MapKey& o) const {
    return p == o.p && rows == o.rows && cols == o.cols && box_rows == o.box_rows;
  }
};
struct MapKeyHash {
  size_t operator()(const MapKey& key) const {
    return std::hash<const void*>()(key.p) ^ (static_cast<size_t>(key.rows) * 0x9e3779b97f4a7c15ull) ^
           (static_cast<size_t>(key.cols) << 20) ^ key.box_rows;
  }
};

CUtensorMap tensor_map(const void* p, int64_t rows, int64_t cols, uint32_t box_rows) {
  static std::mutex mutex;
  static std::unordered_map<MapKey, CUtensorMap, MapKeyHash> maps;
  std::lock_guard<std::mutex> lock(mutex);
  if (maps.size() > 4096) maps.clear();  // a bound, not a working-set size
  const MapKey key{p, rows, cols, box_rows};
  auto it = maps.find(key);
  if (it == maps.end()) {
    CUtensorMap map;
    EXACTLY_CUDA_REQUIRE(make_matrix_tensor_map(&map, p, rows, cols, box_rows),
                         "gemm_rows: cannot describe a %lld x %lld matrix to the copy engine",
                         static_cast<long long>(rows), static_cast<long long>(cols));
    it = maps.emplace(key, map).first;
  }
  return it->second;
}

template <int N, int P>
void launch(const void* x, const void* w, void* out, int64_t m, int64_t n_out, int64_t k, OutKind kind,
            cudaStream_t stream) {
  using S = RowsShape<N, P>;
  constexpr auto kernel = gemm_rows_kernel<N, P>;
  static const bool configured = [] {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSharedBytes),
               "gemm_rows");
    return true;
  }();
  (void)configured;
  const CUtensorMap w_map = tensor_map(w, n_out, k, kTileRows);
  const CUtensorMap x_map = tensor_map(x, m, k, N);
  // One CTA per SM, but no more than there are tiles (a share is at least a
  // tile: StepShare) or hand-off slots.
  const int64_t tiles = (n_out + kTileRows - 1) / kTileRows;
  const auto grid = static_cast<unsigned>(std::min<int64_t>({tiles, device_multiprocessors(), kMaxGrid}));
  launch_dependent("gemm_rows", LaunchRole::kProduct, kernel, dim3(grid), dim3(S::kThreads), S::kSharedBytes, stream,
                   w_map, x_map, out, static_cast<int>(m), static_cast<int>(n_out), static_cast<int>(k),
                   static_cast<int>(kind));
}

template <int P>
void launch_for_rows(const void* x, const void* w, void* out, int64_t m, int64_t n_out, int64_t k, OutKind kind,
                     cudaStream_t stream) {
  switch ((m + 7) / 8) {
    case 1: return launch<8, P>(x, w, out, m, n_out, k, kind, stream);
    case 2: return launch<16, P>(x, w, out, m, n_out, k, kind, stream);
    case 3: return launch<24, P>(x, w, out, m, n_out, k, kind, stream);
    case 4: return launch<32, P>(x, w, out, m, n_out, k, kind, stream);
    case 5: return launch<40, P>(x, w, out, m, n_out, k, kind, stream);
    case 6: return launch<48, P>(x, w, out, m, n_out, k, kind, stream);
    case 7: return launch<56, P>(x, w, out, m, n_out, k, kind, stream);
    default: return launch<64, P>(x, w, out, m, n_out, k, kind, stream);
  }
}

}  // namespace

bool gemm_rows_applies(int64_t m, int64_t n_out, int64_t k, const void* x, const void* w) {
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  return m >= 1 && m <= kGemmRowsMax && n_out >= 1 && n_out < (int64_t{1} << 31) && k >= 64 && k % 64 == 0 &&
         k < (int64_t{1} << 31) && aligned(x) && aligned(w);
}

void gemm_rows_bf16(const void* x, const void* w, void* out, int64_t m, int64_t n_out, int64_t k, GemmOut out_type,
                    bool accumulate, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(gemm_rows_applies(m, n_out, k, x, w),
                       "gemm_rows: %lld rows of a %lld x %lld weight (at most %d rows, k a multiple of 64)",
                       static_cast<long long>(m), static_cast<long long>(n_out), static_cast<long long>(k),
                       kGemmRowsMax);
  EXACTLY_CUDA_REQUIRE(!accumulate || out_type == GemmOut::f32, "gemm_rows: accumulating needs an fp32 output");
  const OutKind kind = out_type == GemmOut::bf16 ? OutKind::kBf16 : accumulate ? OutKind::kF32Add : OutKind::kF32;
  // Stages of 256 columns of k where k allows, else of 64.
  if (k % 256 == 0) return launch_for_rows<4>(x, w, out, m, n_out, k, kind, stream);
  launch_for_rows<1>(x, w, out, m, n_out, k, kind, stream);
}

}  // namespace exactly::kernels::cuda
