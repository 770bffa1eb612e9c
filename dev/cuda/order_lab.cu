// Lab: which product kernels sum a row of x · wᵀ in the same order, bit for
// bit. The reference ("canonical") order is one fp32 accumulator fed by the
// tensor core's k16 steps from k = 0 upwards. The questions:
//   1. do wgmma's N = 8..256, the operands swapped (weight rows as A or as B),
//      mma.sync m16n8k16, and the first step overwriting instead of adding to
//      zero, all give the canonical bits?
//   2. which of cuBLASLt's algorithms (with and without split-K) give them, at
//      which row counts, and how fast is each?
// Negative controls: the same chain walked from the top of k, and the
// streaming single-row kernel (CUDA cores), must differ.
//
//   order_lab [--quick | --variants]   (--variants: question 1 and our kernels only)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_rows.h"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/wgmma_kk.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"
#include "lab_common.h"

#define LT(x)                                                                               \
  do {                                                                                      \
    cublasStatus_t status_ = (x);                                                           \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, int(status_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

namespace {

using namespace exactly::kernels::cuda;
using bf16 = __nv_bfloat16;

__global__ void fill_bf16(bf16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    h *= 3266489917u;
    h ^= h >> 16;
    p[i] = __float2bfloat16(scale * (static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f));
  }
}

__global__ void fill_f32(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2246822519u ^ seed;
    h ^= h >> 13;
    h *= 2654435761u;
    h ^= h >> 16;
    p[i] = static_cast<float>(h & 0xffffff) / 4194304.0f - 2.0f;
  }
}

// One operand tile [rows][64] of a K-major matrix into shared memory in the
// 128-byte swizzle; rows past `limit` are zeros.
__device__ void stage_tile(uint8_t* tile, const bf16* src, int64_t row0, int rows, int64_t limit, int64_t ld,
                           int64_t k0) {
  for (int i = threadIdx.x; i < rows * 8; i += blockDim.x) {
    const int r = i / 8, c = i % 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < limit) v = *reinterpret_cast<const uint4*>(src + (row0 + r) * ld + k0 + c * 8);
    *reinterpret_cast<uint4*>(tile + swizzled(r, c, 128)) = v;
  }
}

// The canonical chain on wgmma: C[64 x NT] over k in 64-wide panels, k16
// steps in order. kSwap = false: A = 64 weight rows, B = NT input rows;
// true: A = 64 input rows, B = NT weight rows. `reverse` walks the panels
// from the top (a negative control); `overwrite_first` makes the first step
// overwrite the accumulators instead of adding to zeros.
template <int NT, bool kSwap>
__global__ void __launch_bounds__(128) canon_wgmma(const bf16* x, const bf16* w, float* out, int m, int n_out, int k,
                                                   int reverse, int overwrite_first) {
#ifdef EXACTLY_HAS_WGMMA
  __shared__ __align__(1024) uint8_t a_tile[64 * 128];
  __shared__ __align__(1024) uint8_t b_tile[NT * 128];
  const int64_t a_row0 = int64_t{blockIdx.x} * 64, b_row0 = int64_t{blockIdx.y} * NT;
  const bf16* a_src = kSwap ? x : w;
  const bf16* b_src = kSwap ? w : x;
  const int64_t a_limit = kSwap ? m : n_out, b_limit = kSwap ? n_out : m;
  float acc[NT / 2];
#pragma unroll
  for (int i = 0; i < NT / 2; ++i) acc[i] = 0.0f;
  const int panels = k / 64;
  for (int p = 0; p < panels; ++p) {
    const int64_t k0 = int64_t{reverse ? panels - 1 - p : p} * 64;
    stage_tile(a_tile, a_src, a_row0, 64, a_limit, k, k0);
    stage_tile(b_tile, b_src, b_row0, NT, b_limit, k, k0);
    fence_proxy_async();
    __syncthreads();
    wgmma_fence();
    const uint64_t a_desc = wgmma_descriptor(smem_address(a_tile), 64 * 128, 1024);
    const uint64_t b_desc = wgmma_descriptor(smem_address(b_tile), NT * 128, 1024);
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)
      wgmma_kk<NT>(acc, wgmma_descriptor_advance(a_desc, ks * 32), wgmma_descriptor_advance(b_desc, ks * 32),
                   !(overwrite_first && p == 0 && ks == 0));
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_keep(acc);
    __syncthreads();
  }
  const int warp = threadIdx.x / 32, g = (threadIdx.x % 32) / 4, c = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < NT / 2; ++j) {
    const int64_t i = a_row0 + 16 * warp + g + ((j % 4) >= 2 ? 8 : 0);
    const int64_t jj = b_row0 + 8 * (j / 4) + 2 * c + (j % 2);
    const int64_t token = kSwap ? i : jj, row = kSwap ? jj : i;
    if (token < m && row < n_out) out[token * n_out + row] = acc[j];
  }
#endif
}

// The canonical chain on mma.sync m16n8k16, fragments read straight from
// global memory: one warp a 16 x 8 tile. kSwap as above (A = 16 weight rows
// or 16 input rows).
template <bool kSwap>
__global__ void canon_mma(const bf16* x, const bf16* w, float* out, int m, int n_out, int k) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int64_t a_row0 = int64_t{blockIdx.x} * 16, b_row0 = int64_t{blockIdx.y} * 8;
  const bf16* a_src = kSwap ? x : w;
  const bf16* b_src = kSwap ? w : x;
  const int64_t a_limit = kSwap ? m : n_out, b_limit = kSwap ? n_out : m;
  auto pair = [&](const bf16* src, int64_t row, int64_t limit, int64_t col) -> uint32_t {
    if (row >= limit) return 0u;
    return *reinterpret_cast<const uint32_t*>(src + row * k + col);
  };
  float d[4] = {0, 0, 0, 0};
  for (int64_t k0 = 0; k0 < k; k0 += 16) {
    const uint32_t a[4] = {pair(a_src, a_row0 + g, a_limit, k0 + 2 * c), pair(a_src, a_row0 + g + 8, a_limit, k0 + 2 * c),
                           pair(a_src, a_row0 + g, a_limit, k0 + 8 + 2 * c),
                           pair(a_src, a_row0 + g + 8, a_limit, k0 + 8 + 2 * c)};
    const uint32_t b0 = pair(b_src, b_row0 + g, b_limit, k0 + 2 * c), b1 = pair(b_src, b_row0 + g, b_limit, k0 + 8 + 2 * c);
    Elem<bf16>::mma(d, a, b0, b1);
  }
  for (int j = 0; j < 4; ++j) {
    const int64_t i = a_row0 + g + (j >= 2 ? 8 : 0), jj = b_row0 + 2 * c + (j % 2);
    const int64_t token = kSwap ? i : jj, row = kSwap ? jj : i;
    if (token < m && row < n_out) out[token * n_out + row] = d[j];
  }
}

// Elements of `got` that differ from what the canonical accumulators `acc`
// give through the output stage: bf16 rounding, or init + acc in fp32.
enum class Stage { kF32, kBf16, kAddInit };
__global__ void count_diff(const void* got, const float* acc, const float* init, int64_t n, Stage stage,
                           unsigned long long* diffs) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    bool same;
    if (stage == Stage::kBf16) {
      const bf16 want = __float2bfloat16_rn(acc[i]);
      same = reinterpret_cast<const uint16_t*>(got)[i] == *reinterpret_cast<const uint16_t*>(&want);
    } else {
      const float want = stage == Stage::kAddInit ? __fadd_rn(init[i], acc[i]) : acc[i];
      same = __float_as_uint(static_cast<const float*>(got)[i]) == __float_as_uint(want);
    }
    local += same ? 0 : 1;
  }
  if (local) atomicAdd(diffs, local);
}

struct Shape {
  const char* name;
  int64_t n_out, k;
  Stage stage;  // what the engine asks of it: bf16 out, f32 += (residual), or f32 out (logits)
};
const Shape kShapes[] = {
    {"L8B qkv", 6144, 4096, Stage::kBf16},      {"L8B o", 4096, 4096, Stage::kAddInit},
    {"L8B gate_up", 28672, 4096, Stage::kBf16}, {"L8B down", 4096, 14336, Stage::kAddInit},
    {"L8B head", 128256, 4096, Stage::kF32},    {"Smol qkv", 960, 576, Stage::kBf16},
    {"Smol o", 576, 576, Stage::kAddInit},      {"Smol gate_up", 3072, 576, Stage::kBf16},
    {"Smol down", 576, 1536, Stage::kAddInit},  {"Smol head", 49152, 576, Stage::kF32},
};

struct Buffers {
  bf16* x = nullptr;
  std::vector<bf16*> w;  // copies, rotated so timings read weights from memory
  float* canon = nullptr;
  float* scratch = nullptr;
  float* init = nullptr;
  void* out = nullptr;
  unsigned long long* diffs = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = size_t{32} << 20;
};

unsigned long long diff_count(const Buffers& b, const void* got, int64_t n, Stage stage) {
  CK(cudaMemset(b.diffs, 0, sizeof(unsigned long long)));
  count_diff<<<1024, 256>>>(got, b.canon, b.init, n, stage, b.diffs);
  CK(cudaGetLastError());
  unsigned long long d = 0;
  CK(cudaMemcpy(&d, b.diffs, sizeof d, cudaMemcpyDeviceToHost));
  return d;
}

template <int NT, bool kSwap>
void run_canon(const Buffers& b, float* out, int m, const Shape& s, int reverse, int overwrite) {
  const int64_t a_rows = kSwap ? m : s.n_out, b_rows = kSwap ? s.n_out : m;
  dim3 grid(static_cast<unsigned>((a_rows + 63) / 64), static_cast<unsigned>((b_rows + NT - 1) / NT));
  canon_wgmma<NT, kSwap><<<grid, 128>>>(b.x, b.w[0], out, m, static_cast<int>(s.n_out), static_cast<int>(s.k), reverse,
                                        overwrite);
  CK(cudaGetLastError());
}

template <bool kSwap>
void run_mma(const Buffers& b, float* out, int m, const Shape& s) {
  const int64_t a_rows = kSwap ? m : s.n_out, b_rows = kSwap ? s.n_out : m;
  dim3 grid(static_cast<unsigned>((a_rows + 15) / 16), static_cast<unsigned>((b_rows + 7) / 8));
  canon_mma<kSwap><<<grid, 32>>>(b.x, b.w[0], out, m, static_cast<int>(s.n_out), static_cast<int>(s.k));
  CK(cudaGetLastError());
}

// Question 1 for one shape and row count: each variant's raw accumulators
// against the canonical ones.
void instruction_variants(const Buffers& b, const Shape& s, int m) {
  const int64_t n = int64_t{m} * s.n_out;
  const char* names[] = {"wgmma n8", "wgmma n16", "wgmma n24", "wgmma n64", "wgmma n128", "wgmma n256",
                         "wgmma n8 first overwrites", "wgmma swapped n64", "wgmma swapped n256", "mma.sync",
                         "mma.sync swapped", "CONTROL wgmma k reversed"};
  for (int v = 0; v < 12; ++v) {
    CK(cudaMemset(b.scratch, 0xff, n * 4));
    float* o = b.scratch;
    switch (v) {
      case 0: run_canon<8, false>(b, o, m, s, 0, 0); break;
      case 1: run_canon<16, false>(b, o, m, s, 0, 0); break;
      case 2: run_canon<24, false>(b, o, m, s, 0, 0); break;
      case 3: run_canon<64, false>(b, o, m, s, 0, 0); break;
      case 4: run_canon<128, false>(b, o, m, s, 0, 0); break;
      case 5: run_canon<256, false>(b, o, m, s, 0, 0); break;
      case 6: run_canon<8, false>(b, o, m, s, 0, 1); break;
      case 7: run_canon<64, true>(b, o, m, s, 0, 0); break;
      case 8: run_canon<256, true>(b, o, m, s, 0, 0); break;
      case 9: run_mma<false>(b, o, m, s); break;
      case 10: run_mma<true>(b, o, m, s); break;
      default: run_canon<8, false>(b, o, m, s, 1, 0); break;
    }
    CK(cudaDeviceSynchronize());
    std::printf("  %-14s m=%-5d %-28s differ %llu / %lld\n", s.name, m, names[v], diff_count(b, b.scratch, n, Stage::kF32),
                static_cast<long long>(n));
  }
  if (m <= kGemmRowsMax) {
    CK(cudaMemset(b.scratch, 0xff, n * 4));
    gemm_rows_bf16(b.x, b.w[0], b.scratch, m, s.n_out, s.k, GemmOut::f32, false, nullptr);
    CK(cudaDeviceSynchronize());
    std::printf("  %-14s m=%-5d %-28s differ %llu / %lld\n", s.name, m, "gemm_rows",
                diff_count(b, b.scratch, n, Stage::kF32), static_cast<long long>(n));
  }
  if (m <= kGemvMaxRows && s.stage == Stage::kF32) {
    CK(cudaMemset(b.scratch, 0xff, n * 4));
    gemv_bf16(b.x, b.w[0], b.scratch, m, s.n_out, s.k, GemmOut::f32, false, nullptr);
    CK(cudaDeviceSynchronize());
    std::printf("  %-14s m=%-5d %-28s differ %llu / %lld\n", s.name, m, "CONTROL streaming gemv",
                diff_count(b, b.scratch, n, Stage::kF32), static_cast<long long>(n));
  }
}

// The algorithm's numerical implementation flags (CUBLASLT_NUMERICAL_IMPL_FLAGS_*).
unsigned long long impl_flags(const cublasLtMatmulAlgo_t& algo) {
  uint64_t flags = 0;
  size_t written = 0;
  cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS, &flags, sizeof flags, &written);
  return flags;
}

int config_attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  int32_t v = -1;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof v, &written) != CUBLAS_STATUS_SUCCESS) return -1;
  return v;
}

// Question 2: cuBLASLt's candidates for one shape and row count, with and
// without split-K allowed: bits against canonical, and time.
void cublaslt_candidates(cublasLtHandle_t lt, const Buffers& b, const Shape& s, int m, int max_candidates) {
  const bool f32 = s.stage != Stage::kBf16, accumulate = s.stage == Stage::kAddInit;
  const int64_t n = int64_t{m} * s.n_out;
  cublasLtMatmulDesc_t op;
  LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la, lb, lc;
  LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k, s.n_out, s.k));
  LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.k, m, s.k));
  LT(cublasLtMatrixLayoutCreate(&lc, f32 ? CUDA_R_32F : CUDA_R_16BF, s.n_out, m, s.n_out));
  for (int restricted = 1; restricted >= 0; --restricted) {
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &b.ws_bytes,
                                            sizeof b.ws_bytes));
    if (restricted) {
      const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
      LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &none, sizeof none));
    }
    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(max_candidates));
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, max_candidates, results.data(), &found));
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    for (int i = 0; i < found; ++i) {
      const cublasLtMatmulAlgo_t& algo = results[static_cast<size_t>(i)].algo;
      if (accumulate) CK(cudaMemcpy(b.out, b.init, n * 4, cudaMemcpyDeviceToDevice));
      if (cublasLtMatmul(lt, op, &alpha, b.w[0], la, b.x, lb, &beta, b.out, lc, b.out, lc, &algo, b.ws, b.ws_bytes,
                         nullptr) != CUBLAS_STATUS_SUCCESS)
        continue;
      CK(cudaDeviceSynchronize());
      const unsigned long long d = diff_count(b, b.out, n, s.stage);
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<float> ms;
      for (int rep = 0; rep < 8; ++rep) {
        CK(cudaEventRecord(e0));
        for (int j = 0; j < 4; ++j)
          cublasLtMatmul(lt, op, &alpha, b.w[static_cast<size_t>(rep * 4 + j) % b.w.size()], la, b.x, lb, &beta, b.out,
                         lc, b.out, lc, &algo, b.ws, b.ws_bytes, nullptr);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (rep > 0) ms.push_back(t / 4);
      }
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
      const float us = median(ms) * 1e3f;
      const double weight_gbs = double(s.n_out) * s.k * 2 / (us * 1e-6) / 1e9;
      const double tflops = 2.0 * m * s.n_out * s.k / (us * 1e-6) / 1e12;
      std::printf("  %-14s m=%-5d %s #%-2d id %3d impl %#llx tile %3d stages %3d splitk %2d red %d swz %d cluster %2d | "
                  "differ %llu | %8.1f us %7.0f GB/s %6.1f TFLOP/s\n",
                  s.name, m, restricted ? "nosplit" : "any    ", i, config_attr(algo, CUBLASLT_ALGO_CONFIG_ID),
                  impl_flags(algo),
                  config_attr(algo, CUBLASLT_ALGO_CONFIG_TILE_ID), config_attr(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                  config_attr(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                  config_attr(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                  config_attr(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                  config_attr(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID), d, us, weight_gbs, tflops);
      std::fflush(stdout);
    }
    cublasLtMatmulPreferenceDestroy(pref);
  }
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const bool variants_only = argc > 1 && std::string(argv[1]) == "--variants";
  Buffers b;
  const int64_t max_m = 8192, max_k = 14336, max_out = 128256;
  CK(cudaMalloc(&b.x, max_m * max_k * 2));
  fill_bf16<<<2048, 256>>>(b.x, max_m * max_k, 7u, 1.0f);
  for (int i = 0; i < 3; ++i) {
    bf16* w;
    CK(cudaMalloc(&w, max_out * 4096 * 2));
    fill_bf16<<<2048, 256>>>(w, max_out * 4096, 100u + i, 0.05f);
    b.w.push_back(w);
  }
  const size_t out_elems = size_t{8192} * 28672;  // the largest product's output (2048 rows of the head are less)
  CK(cudaMalloc(&b.canon, out_elems * 4));
  CK(cudaMalloc(&b.scratch, out_elems * 4));
  CK(cudaMalloc(&b.init, out_elems * 4));
  CK(cudaMalloc(&b.out, out_elems * 4));
  CK(cudaMalloc(&b.diffs, sizeof(unsigned long long)));
  CK(cudaMalloc(&b.ws, b.ws_bytes));
  fill_f32<<<2048, 256>>>(b.init, static_cast<int64_t>(out_elems), 5u);
  CK(cudaDeviceSynchronize());
  cublasLtHandle_t lt;
  LT(cublasLtCreate(&lt));

  const std::vector<int> rows_all = {1, 2, 3, 8, 16, 32, 64, 128, 256, 1024, 8192};
  const std::vector<int> rows_quick = {1, 8, 64, 1024};
  std::printf("== instruction variants against the canonical chain (wgmma n8, zeros + accumulate)\n");
  for (const Shape& s : kShapes) {
    for (int m : {1, 5, 17, 64, 200}) {
      run_canon<8, false>(b, b.canon, m, s, 0, 0);
      CK(cudaDeviceSynchronize());
      instruction_variants(b, s, m);
    }
    if (quick) break;
  }
  if (variants_only) return 0;
  std::printf("== cuBLASLt candidates against the canonical chain\n");
  for (const Shape& s : kShapes) {
    for (int m : quick ? rows_quick : rows_all) {
      if (s.n_out > 100000 && m > 2048) continue;
      if (int64_t{m} * s.n_out > int64_t(out_elems)) continue;
      run_canon<64, false>(b, b.canon, m, s, 0, 0);
      CK(cudaDeviceSynchronize());
      cublaslt_candidates(lt, b, s, m, quick ? 4 : 12);
    }
  }
  return 0;
}
