// The mixture-of-experts kernels of moe.h: routing (a warp per token),
// grouping (one block: counts, offsets, rows placed by atomics, the tiles),
// the experts' products (mma.sync over 64 x 64 tiles, four stages of cp.async)
// and the weighted sum of each token's experts.
//
// The products keep kStages copies in flight: with few rows a step (decode)
// a tile's time is the latency of streaming its 64 weight rows, which only
// several loads in flight per CTA hide. Each kernel is a dependent launch
// (dependent_launch.h): it waits for its predecessor before reading anything.
#include <cfloat>
#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/moe.h"

namespace exactly::kernels::cuda {

namespace {

using bf16 = __nv_bfloat16;

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// ---- routing: the k largest logits of a token, by one warp

constexpr int kRouteWarps = 4;
constexpr int kPerLane = kMoeMaxExperts / 32;

// Whether (v, e) ranks above (best, best_e): the larger logit, the lower
// index among equal ones (NaN ranks as -inf).
__device__ __forceinline__ bool ranks_above(float v, int e, float best, int best_e) {
  return v > best || (v == best && e < best_e);
}

__global__ void __launch_bounds__(kRouteWarps * 32)
    route_kernel(const float* logits, int64_t n, int n_experts, int k, int32_t* chosen, float* weight) {
  wait_for_predecessor();
  release_dependents();
  const int lane = threadIdx.x % 32;
  const int64_t t = int64_t{blockIdx.x} * kRouteWarps + threadIdx.x / 32;
  if (t >= n) return;
  const float* row = logits + t * n_experts;
  float v[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    const float x = e < n_experts ? row[e] : -INFINITY;
    v[i] = isnan(x) ? -INFINITY : x;
  }
  uint32_t taken = 0;  // bit i: expert lane + 32 i is chosen
  int picked[kMoeMaxChosen];
  float picked_logit[kMoeMaxChosen];
  for (int j = 0; j < k; ++j) {
    float best = -INFINITY;
    int best_e = INT_MAX;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + 32 * i;
      if (e < n_experts && !((taken >> i) & 1u) && ranks_above(v[i], e, best, best_e)) {
        best = v[i];
        best_e = e;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_e = __shfl_xor_sync(0xffffffffu, best_e, offset);
      if (ranks_above(other, other_e, best, best_e)) {
        best = other;
        best_e = other_e;
      }
    }
    if (best_e % 32 == lane) taken |= 1u << (best_e / 32);
    picked[j] = best_e;
    picked_logit[j] = best;
  }
  if (lane != 0) return;
  for (int j = 1; j < k; ++j)  // increasing expert order: the order of the token's sum
    for (int i = j; i > 0 && picked[i - 1] > picked[i]; --i) {
      const int e = picked[i];
      picked[i] = picked[i - 1];
      picked[i - 1] = e;
      const float l = picked_logit[i];
      picked_logit[i] = picked_logit[i - 1];
      picked_logit[i - 1] = l;
    }
  double top = -INFINITY, ex[kMoeMaxChosen], sum = 0;
  for (int j = 0; j < k; ++j) top = fmax(top, static_cast<double>(picked_logit[j]));
  for (int j = 0; j < k; ++j) sum += ex[j] = exp(static_cast<double>(picked_logit[j]) - top);
  for (int j = 0; j < k; ++j) {
    chosen[t * k + j] = picked[j];
    weight[t * k + j] = static_cast<float>(ex[j] / sum);
  }
}

// ---- grouping: each (token, choice) a row of its expert's group, and the tiles

constexpr int kGroupThreads = 1024;

__global__ void __launch_bounds__(kGroupThreads)
    group_kernel(const int32_t* chosen, int rows, int k, int n_experts, int32_t* row_of, int32_t* token_of_row,
                 int32_t* tiles, int32_t* tile_count) {
  wait_for_predecessor();
  release_dependents();
  __shared__ int count[kMoeMaxExperts];
  __shared__ int first[kMoeMaxExperts + 1];
  for (int e = threadIdx.x; e < n_experts; e += kGroupThreads) count[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < rows; i += kGroupThreads) atomicAdd(&count[chosen[i]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int at = 0, t = 0;
    for (int e = 0; e < n_experts; ++e) {
      first[e] = at;
      for (int b = 0; b < count[e]; b += kMoeTileRows, ++t) {
        tiles[3 * t] = e;
        tiles[3 * t + 1] = at + b;
        tiles[3 * t + 2] = at + min(b + kMoeTileRows, count[e]);
      }
      at += count[e];
    }
    first[n_experts] = at;
    *tile_count = t;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_experts; e += kGroupThreads) count[e] = 0;  // now each group's next free row
  __syncthreads();
  for (int i = threadIdx.x; i < rows; i += kGroupThreads) {
    const int e = chosen[i];
    const int r = first[e] + atomicAdd(&count[e], 1);
    row_of[i] = r;
    token_of_row[r] = i / k;
  }
}

// ---- the experts' products: a 64-row tile of one group against 64 weight rows

constexpr int kThreads = 128;  // four warps, 2 x 2 over the tile, 32 x 32 each
constexpr int kRowBytes = kMoeTileK * 2;
constexpr int kStageBytes = kMoeTileRows * kRowBytes;  // one operand's tile of one stage
constexpr int kStages = 4;
constexpr int kSharedBytes = kStages * 2 * kStageBytes;

template <typename OutT>
__device__ __forceinline__ void store_pair(OutT* out, float lo, float hi);

template <>
__device__ __forceinline__ void store_pair<float>(float* out, float lo, float hi) {
  *reinterpret_cast<float2*>(out) = make_float2(lo, hi);
}

template <>
__device__ __forceinline__ void store_pair<bf16>(bf16* out, float lo, float hi) {
  *reinterpret_cast<uint32_t*>(out) = Elem<bf16>::pack(lo, hi);
}

template <typename OutT>
__global__ void __launch_bounds__(kThreads)
    products_kernel(const bf16* in, bool gather, const bf16* w, OutT* out, int64_t N, int64_t K,
                    const int32_t* token_of_row, const int32_t* tiles, const int32_t* tile_count) {
  wait_for_predecessor();
  release_dependents();
  const int tile = blockIdx.y;
  if (tile >= *tile_count) return;
  const int e = tiles[3 * tile], r0 = tiles[3 * tile + 1], r1 = tiles[3 * tile + 2];
  const int64_t n0 = int64_t{blockIdx.x} * kMoeTileCols;
  extern __shared__ __align__(128) uint8_t smem[];  // [stage][A, B][kStageBytes]
  auto tile_of = [&](int stage, int operand) { return smem + (stage * 2 + operand) * kStageBytes; };

  // Each thread copies one 16-byte chunk of four rows of each operand.
  const int tid = threadIdx.x, lrow = tid / 8, lchunk = tid % 8;
  const bf16* a_src[4];
  bool a_valid[4];
  const bf16* b_src[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = r0 + lrow + 16 * i;
    a_valid[i] = r < r1;
    const int64_t src = !a_valid[i] ? 0 : gather ? token_of_row[r] : r;
    a_src[i] = in + src * K + lchunk * 8;
    b_src[i] = w + (int64_t{e} * N + n0 + lrow + 16 * i) * K + lchunk * 8;
  }
  auto load = [&](int stage, int64_t k0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t at = swizzled(lrow + 16 * i, lchunk, kRowBytes);
      cp_async_16(smem_address(tile_of(stage, 0) + at), a_src[i] + k0, a_valid[i]);
      cp_async_16(smem_address(tile_of(stage, 1) + at), b_src[i] + k0, true);
    }
    cp_async_commit();
  };

  const int warp = tid / 32, lane = tid % 32, warp_m = warp / 2, warp_n = warp % 2;
  float acc[2][4][4] = {};
  const int64_t steps = K / kMoeTileK;
  // One commit group per k-step (empty past the end), so that waiting for all
  // but kStages - 2 groups means step s has landed.
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps)
      load(s, s * kMoeTileK);
    else
      cp_async_commit();
  }
  for (int64_t s = 0; s < steps; ++s) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // step s is in for every thread, and step s - 1's stage is free
    const int64_t next = s + kStages - 1;
    if (next < steps)
      load(static_cast<int>(next % kStages), next * kMoeTileK);
    else
      cp_async_commit();
    const int stage = static_cast<int>(s % kStages);
    const uint32_t A = smem_address(tile_of(stage, 0)), B = smem_address(tile_of(stage, 1));
#pragma unroll
    for (int kk = 0; kk < kMoeTileK / 16; ++kk) {  // k16 steps in increasing k: the canonical order
      uint32_t a[2][4], b[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        const int row = warp_m * 32 + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4(a[mt], A + swizzled(row, kk * 2 + (lane >> 4), kRowBytes));
      }
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        const int row = warp_n * 32 + np * 16 + (lane >> 4) * 8 + (lane & 7);
        ldmatrix_x4(b[np], B + swizzled(row, kk * 2 + ((lane >> 3) & 1), kRowBytes));
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
          Elem<bf16>::mma(acc[mt][nt], a[mt], b[nt / 2][(nt % 2) * 2], b[nt / 2][(nt % 2) * 2 + 1]);
    }
  }

  const int g = lane / 4, c = lane % 4;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = r0 + warp_m * 32 + mt * 16 + g + half * 8;
      if (r >= r1) continue;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int64_t col = n0 + warp_n * 32 + nt * 8 + 2 * c;
        store_pair(out + int64_t{r} * N + col, acc[mt][nt][2 * half], acc[mt][nt][2 * half + 1]);
      }
    }
}

// ---- each token's experts summed, in increasing expert order

constexpr int kCombineThreads = 256;

__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(const float* y, const int32_t* row_of, const float* weight, int k, int dim, float* x) {
  wait_for_predecessor();
  release_dependents();
  const int64_t t = blockIdx.x;
  for (int d = threadIdx.x; d < dim; d += kCombineThreads) {
    float sum = 0.f;
    for (int j = 0; j < k; ++j) sum = fmaf(weight[t * k + j], y[int64_t{row_of[t * k + j]} * dim + d], sum);
    x[t * dim + d] += sum;
  }
}

}  // namespace

size_t moe_routes_bytes(int64_t n, int k, int n_experts) {
  const size_t entries = static_cast<size_t>(n) * static_cast<size_t>(k);
  return 4 * align256(entries * 4) + align256(static_cast<size_t>(moe_max_tiles(n, k, n_experts)) * 12) + 256;
}

MoeRoutes moe_routes_at(void* base, int64_t n, int k, int n_experts) {
  auto* at = static_cast<uint8_t*>(base);
  auto take = [&](size_t bytes) {
    uint8_t* p = at;
    at += align256(bytes);
    return p;
  };
  const size_t entries = static_cast<size_t>(n) * static_cast<size_t>(k);
  MoeRoutes r{};
  r.chosen = reinterpret_cast<int32_t*>(take(entries * 4));
  r.weight = reinterpret_cast<float*>(take(entries * 4));
  r.row_of = reinterpret_cast<int32_t*>(take(entries * 4));
  r.token_of_row = reinterpret_cast<int32_t*>(take(entries * 4));
  r.tiles = reinterpret_cast<int32_t*>(take(static_cast<size_t>(moe_max_tiles(n, k, n_experts)) * 12));
  r.tile_count = reinterpret_cast<int32_t*>(take(4));
  return r;
}

void moe_route(const float* logits, int64_t n, int n_experts, int k, const MoeRoutes& r, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(n_experts >= 1 && n_experts <= kMoeMaxExperts && k >= 1 && k <= kMoeMaxChosen &&
                           k <= n_experts && n >= 0 && n * k < INT_MAX,
                       "moe_route: %lld tokens, %d of %d experts (at most %d of %d)", static_cast<long long>(n), k,
                       n_experts, kMoeMaxChosen, kMoeMaxExperts);
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>((n + kRouteWarps - 1) / kRouteWarps);
  launch_dependent("moe_route", LaunchRole::kOther, route_kernel, dim3(blocks), dim3(kRouteWarps * 32), 0, stream,
                   logits, n, n_experts, k, r.chosen, r.weight);
  launch_dependent("moe_group", LaunchRole::kOther, group_kernel, dim3(1), dim3(kGroupThreads), 0, stream, r.chosen,
                   static_cast<int>(n * k), k, n_experts, r.row_of, r.token_of_row, r.tiles, r.tile_count);
}

void moe_products(const MoeProducts& p, const MoeRoutes& r, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(p.N > 0 && p.N % kMoeTileCols == 0 && p.K > 0 && p.K % kMoeTileK == 0,
                       "moe_products: N %lld must be a multiple of %d and K %lld of %d", static_cast<long long>(p.N),
                       kMoeTileCols, static_cast<long long>(p.K), kMoeTileK);
  EXACTLY_CUDA_REQUIRE(aligned16(p.in) && aligned16(p.w) && aligned16(p.out),
                       "moe_products: operands not 16-byte aligned (in %p, w %p, out %p)", p.in, p.w, p.out);
  if (p.n == 0) return;
  const int64_t tiles = moe_max_tiles(p.n, p.k, p.n_experts);
  EXACTLY_CUDA_REQUIRE(tiles <= 65535 && p.N / kMoeTileCols <= INT_MAX,
                       "moe_products: %lld row tiles (at most 65,535: fewer tokens a step)", static_cast<long long>(tiles));
  const dim3 grid(static_cast<unsigned>(p.N / kMoeTileCols), static_cast<unsigned>(tiles));
  const auto* in = static_cast<const bf16*>(p.in);
  const auto* w = static_cast<const bf16*>(p.w);
  allow_shared_memory<products_kernel<float>>(kSharedBytes, "moe_products");
  allow_shared_memory<products_kernel<bf16>>(kSharedBytes, "moe_products");
  if (p.out_type == GemmOut::f32)
    launch_dependent("moe_products", LaunchRole::kOther, products_kernel<float>, grid, dim3(kThreads), kSharedBytes,
                     stream, in, p.gather, w, static_cast<float*>(p.out), p.N, p.K, r.token_of_row, r.tiles,
                     r.tile_count);
  else
    launch_dependent("moe_products", LaunchRole::kOther, products_kernel<bf16>, grid, dim3(kThreads), kSharedBytes,
                     stream, in, p.gather, w, static_cast<bf16*>(p.out), p.N, p.K, r.token_of_row, r.tiles,
                     r.tile_count);
}

void moe_combine(const float* y, const MoeRoutes& r, int64_t n, int k, int dim, float* x, cudaStream_t stream) {
  if (n == 0) return;
  launch_dependent("moe_combine", LaunchRole::kOther, combine_kernel, dim3(static_cast<unsigned>(n)),
                   dim3(kCombineThreads), 0, stream, y, r.row_of, r.weight, k, dim, x);
}

}  // namespace exactly::kernels::cuda
