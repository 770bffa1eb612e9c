// Kernel lab for the single-row products of a batch-1 decode step: the
// production streaming kernel (src/kernels/cuda/gemv.cu) beside candidate
// versions, each first checked against it bit for bit (and against a float64
// reference), then timed the way a decode step runs them: Llama-3-8B's 32
// layers of q/k/v, o, gate/up and down products plus the head, each layer
// with its own weights (15 GB, far beyond L2), captured in one CUDA graph
// with the products launched as dependents (median of 20 replays), optionally with a small ordinary
// kernel between products as in the engine's chain.
//
//   gemv_lab [VERSION]     without VERSION every version runs
//   gemv_lab --canonical [N ...] the products of a decode step with N rows (1
//                           to 64; default 1 2 4 8 16 32 64) in the canonical
//                           order (gemm.h) against the fastest: each checked
//                           bit for bit against cuBLASLt without split-K
//   gemv_lab --rows [N ...] the products of a decode step with N rows (2 to
//                           64; default 2 4 8 16 32 64): cuBLASLt against
//                           few-row tensor-core kernels
//                           (variants/gemm_rows.cuh), each checked against
//                           float64 and for a row's bits not depending on N
// NOTES.md beside this file records each version's prediction and outcome.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "lab_common.h"
#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_rows.h"
#include "variants/gemm_rows.cuh"
#include "variants/gemv_bulk.cuh"

using namespace exactly::kernels::cuda;
using bf16 = __nv_bfloat16;


namespace {

__global__ void fill_kernel(bf16* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 2246822519u;
    h ^= h >> 13;
    h *= 3266489917u;
    h ^= h >> 16;
    p[i] = __float2bfloat16(scale * (static_cast<float>(h & 0xffffff) / 8388608.0f - 1.0f));
  }
}

// Stands in for the engine's small kernels between products (RMSNorm, RoPE,
// SwiGLU): one block touching a few kilobytes, launched as an ordinary kernel.
__global__ void spacer_kernel(float* p) {
  p[threadIdx.x] += 1.0f;
}

struct Shape {
  const char* name;
  int64_t m, k;
  bool f32, accumulate;
};
const Shape kShapes[] = {{"qkv 6144x4096", 6144, 4096, false, false},
                         {"o 4096x4096", 4096, 4096, true, true},
                         {"gate/up 28672x4096", 28672, 4096, false, false},
                         {"down 4096x14336", 4096, 14336, true, true},
                         {"head 128256x4096", 128256, 4096, true, false}};
constexpr int kLayers = 32;

using LaunchFn = std::function<void(const void* x, const void* w, void* out, int n, const Shape&, cudaStream_t)>;
struct Version {
  std::string name;
  LaunchFn launch;
};

int g_sms = 0;

template <int N, int kChunk, int kStages, bool kEvict>
void launch_bulk(const void* x, const void* w, void* out, const Shape& s, int blocks_per_sm, cudaStream_t stream) {
  constexpr size_t shared = lab::bulk_shared_bytes<kChunk, kStages>();
  auto kernel = lab::gemv_bulk_kernel<N, kChunk, kStages, kEvict>;
  static bool configured = false;
  if (!configured) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
    configured = true;
  }
  const int64_t blocks = std::min<int64_t>(int64_t{g_sms} * blocks_per_sm, s.m);
  launch_dependent("gemv_bulk", LaunchRole::kProduct, kernel, dim3(static_cast<unsigned>(blocks)),
                   dim3((lab::kBulkRows + 1) * 32), shared, stream, static_cast<const bf16*>(x),
                   static_cast<const bf16*>(w), out, s.m, s.k, s.f32, s.accumulate);
}

template <int kChunk, int kStages, bool kEvict>
Version bulk_version(const char* name, int blocks_per_sm) {
  return {name, [=](const void* x, const void* w, void* out, int n, const Shape& s, cudaStream_t st) {
            switch (n) {
              case 1: launch_bulk<1, kChunk, kStages, kEvict>(x, w, out, s, blocks_per_sm, st); break;
              default: launch_bulk<2, kChunk, kStages, kEvict>(x, w, out, s, blocks_per_sm, st); break;
            }
          }};
}

std::vector<Version> versions() {
  std::vector<Version> v;
  v.push_back({"v1 production: warp per row, 8 loads in flight per lane, 8 rows per block",
               [](const void* x, const void* w, void* out, int n, const Shape& s, cudaStream_t st) {
                 gemv_bf16(x, w, out, n, s.m, s.k, s.f32 ? GemmOut::f32 : GemmOut::bf16, s.accumulate, st);
               }});
  v.push_back(bulk_version<1024, 8, false>("v2 bulk copies, 1 block/SM, 8 stages x 8 rows x 1024 cols (128 KB)", 1));
  v.push_back(bulk_version<512, 12, false>("v3 bulk copies, 1 block/SM, 12 stages x 8 x 512 (96 KB)", 1));
  v.push_back(bulk_version<1024, 4, false>("v4 bulk copies, 2 blocks/SM, 4 stages x 8 x 1024 (64 KB each)", 2));
  v.push_back(bulk_version<2048, 6, false>("v5 bulk copies, 1 block/SM, 6 stages x 8 x 2048 (192 KB)", 1));
  v.push_back(bulk_version<1024, 8, true>("v6 v2 with an L2 evict-first hint on the weights", 1));
  v.push_back(bulk_version<1024, 6, false>("v7 bulk copies, 1 block/SM, 6 stages x 8 x 1024 (96 KB)", 1));
  v.push_back(bulk_version<512, 8, false>("v8 bulk copies, 2 blocks/SM, 8 stages x 8 x 512 (64 KB each)", 2));
  return v;
}

struct Buffers {
  std::vector<bf16*> weights[5];  // per shape, per layer (the head: one)
  bf16* x = nullptr;              // 64 rows of up to 14336
  float* out_f32 = nullptr;       // 64 rows of up to 128256
  bf16* out_bf16 = nullptr;
  float* spacer = nullptr;
};

void* out_for(Buffers& b, const Shape& s) { return s.f32 ? static_cast<void*>(b.out_f32) : b.out_bf16; }

std::vector<float> read_out(Buffers& b, const Shape& s, int n) {
  std::vector<float> host(size_t(n * s.m));
  if (s.f32) {
    CK(cudaMemcpy(host.data(), b.out_f32, host.size() * 4, cudaMemcpyDeviceToHost));
  } else {
    std::vector<bf16> h(host.size());
    CK(cudaMemcpy(h.data(), b.out_bf16, h.size() * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < h.size(); ++i) host[i] = __bfloat162float(h[i]);
  }
  return host;
}

void reset_out(Buffers& b, int rows = 2) {
  // A fixed non-zero start, so accumulating products are checked too.
  std::vector<float> start(size_t(rows) * 128256);
  for (size_t i = 0; i < start.size(); ++i) start[i] = 0.001f * static_cast<float>(i % 97);
  CK(cudaMemcpy(b.out_f32, start.data(), start.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(b.out_bf16, 0xff, size_t(rows) * 128256 * 2));  // NaN: every output must be written
}

// float64 reference of the first 64 weight rows for n input rows: out[t * 64 +
// r] and the sum of |x w| beside it (the accumulating shapes start from
// reset_out's values).
struct Reference {
  std::vector<double> value, magnitude;
};
Reference reference(Buffers& b, const Shape& s, const void* w, int n) {
  std::vector<bf16> hx(size_t(n * s.k)), hw(size_t(64 * s.k));
  CK(cudaMemcpy(hx.data(), b.x, hx.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hw.data(), w, hw.size() * 2, cudaMemcpyDeviceToHost));
  Reference ref{std::vector<double>(size_t(n) * 64), std::vector<double>(size_t(n) * 64)};
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < 64; ++r) {
      double sum = s.accumulate ? 0.001 * ((t * s.m + r) % 97) : 0.0, mag = 0;
      for (int64_t j = 0; j < s.k; ++j) {
        const double p = double(__bfloat162float(hw[r * s.k + j])) * __bfloat162float(hx[t * s.k + j]);
        sum += p;
        mag += std::fabs(p);
      }
      ref.value[size_t(t) * 64 + r] = sum;
      ref.magnitude[size_t(t) * 64 + r] = mag;
    }
  return ref;
}

// Every version against the production kernel, bit for bit, and the
// production kernel against float64 on the first rows.
bool validate(const std::vector<Version>& vs, Buffers& b) {
  bool ok = true;
  for (const Shape& s : kShapes) {
    for (int n : {1, 2}) {
      const void* w = b.weights[&s - kShapes][0];
      reset_out(b);
      vs[0].launch(b.x, w, out_for(b, s), n, s, nullptr);
      CK(cudaDeviceSynchronize());
      const auto want = read_out(b, s, n);
      const Reference exact = reference(b, s, w, n);
      double worst = 0;
      for (int t = 0; t < n; ++t)
        for (int r = 0; r < 64; ++r) {
          const double ref = exact.value[size_t(t) * 64 + r], mag = exact.magnitude[size_t(t) * 64 + r];
          const double got = want[size_t(t * s.m + r)];
          const double tol = (s.f32 ? 1e-5 : 8e-3) * (mag + std::fabs(ref));
          worst = std::max(worst, std::fabs(got - ref) / (mag + 1e-30));
          if (!(std::fabs(got - ref) <= tol)) {
            std::printf("  v1 %s n=%d row %d: %.9g vs float64 %.9g\n", s.name, n, r, got, ref);
            ok = false;
            break;
          }
        }
      for (size_t i = 1; i < vs.size(); ++i) {
        reset_out(b);
        vs[i].launch(b.x, w, out_for(b, s), n, s, nullptr);
        CK(cudaDeviceSynchronize());
        const auto got = read_out(b, s, n);
        size_t diff = 0;
        for (size_t j = 0; j < got.size(); ++j)
          if (std::memcmp(&got[j], &want[j], 4) != 0) ++diff;
        if (diff != 0) {
          std::printf("  %s: %s n=%d differs from v1 in %zu of %zu outputs\n", vs[i].name.substr(0, 3).c_str(), s.name,
                      n, diff, got.size());
          ok = false;
        }
      }
      std::printf("validated %-20s n=%d (v1 vs float64: worst error %.2e of the absolute sum)\n", s.name, n, worst);
    }
  }
  return ok;
}


// One table row: each product alone over the layers' weights (us, GB/s),
// then the chain of a step without and with a small kernel between products.
void time_version(const Version& v, Buffers& b, int n, int name_width) {
  std::printf("%-*s", name_width, v.name.c_str());
  for (int si = 0; si < 5; ++si) {
    const Shape& s = kShapes[si];
    const int reps = si == 4 ? 8 : kLayers;
    const float ms = time_graph([&](cudaStream_t st) {
      for (int l = 0; l < reps; ++l) v.launch(b.x, b.weights[si][l % b.weights[si].size()], out_for(b, s), n, s, st);
    });
    const double us = 1000.0 * ms / reps;
    std::printf(" %5.1f(%4.0f)", us, double(s.m * s.k * 2) / us / 1e3);
    std::fflush(stdout);
  }
  for (bool spacers : {false, true}) {
    const float ms = time_graph([&](cudaStream_t st) {
      for (int l = 0; l < kLayers; ++l)
        for (int si = 0; si < 4; ++si) {
          if (spacers) spacer_kernel<<<1, 256, 0, st>>>(b.spacer);
          v.launch(b.x, b.weights[si][l], out_for(b, kShapes[si]), n, kShapes[si], st);
        }
      if (spacers) spacer_kernel<<<1, 256, 0, st>>>(b.spacer);
      v.launch(b.x, b.weights[4][0], out_for(b, kShapes[4]), n, kShapes[4], st);
    });
    std::printf(" %9.3f", ms);
  }
  std::printf("\n");
  std::fflush(stdout);
}

// ---- products with 2 to 64 rows ----

template <int MT, int NT, int WARPS, int U>
void launch_rows(const void* x, const void* w, void* out, int n, const Shape& s, cudaStream_t stream) {
  using S = lab::GemmRowsShape<MT, NT, WARPS, U>;
  auto kernel = lab::gemm_rows_kernel<MT, NT, WARPS, U>;
  static bool configured = false;
  if (!configured) {
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSharedBytes));
    configured = true;
  }
  launch_dependent("gemm_rows", LaunchRole::kProduct, kernel, dim3(unsigned((s.m + S::kRows - 1) / S::kRows)),
                   dim3(S::kThreads), S::kSharedBytes, stream, static_cast<const bf16*>(x),
                   static_cast<const bf16*>(w), out, n, s.m, s.k, s.f32, s.accumulate);
}

template <int MT, int WARPS, int U>
Version rows_version(const char* name) {
  return {name, [](const void* x, const void* w, void* out, int n, const Shape& s, cudaStream_t st) {
            if (n <= 8) return launch_rows<MT, 1, WARPS, U>(x, w, out, n, s, st);
            if (n <= 16) return launch_rows<MT, 2, WARPS, U>(x, w, out, n, s, st);
            if (n <= 32) return launch_rows<MT, 4, WARPS, U>(x, w, out, n, s, st);
            return launch_rows<MT, 8, WARPS, U>(x, w, out, n, s, st);
          }};
}

std::vector<Version> rows_versions() {
  static Gemm cublaslt(GemmOrder::kFastest, 0);
  std::vector<Version> v;
  v.push_back({"r0 cuBLASLt (production)",
               [](const void* x, const void* w, void* out, int n, const Shape& s, cudaStream_t st) {
                 cublaslt.run(x, w, out, n, s.m, s.k, s.f32 ? GemmOut::f32 : GemmOut::bf16, s.accumulate, st);
               }});
  v.push_back(rows_version<2, 8, 4>("r1 32 rows/block, 8 warps, 4 chunks in flight"));
  v.push_back(rows_version<1, 8, 4>("r2 16 rows/block, 8 warps, 4 in flight"));
  v.push_back(rows_version<2, 8, 2>("r3 32 rows/block, 8 warps, 2 in flight"));
  v.push_back(rows_version<2, 4, 4>("r4 32 rows/block, 4 warps, 4 in flight"));
  v.push_back(rows_version<4, 8, 2>("r5 64 rows/block, 8 warps, 2 in flight"));
  v.push_back(rows_version<2, 16, 2>("r6 32 rows/block, 16 warps, 2 in flight"));
  return v;
}

// Each version against float64 on 64 weight rows of every shape at 1, 2 and
// its largest row count, and row 0's bits the same at every row count.
bool validate_rows(const std::vector<Version>& vs, Buffers& b, int max_n) {
  bool ok = true;
  for (const Shape& s : kShapes) {
    const void* w = b.weights[&s - kShapes][0];
    const Reference exact = reference(b, s, w, max_n);  // row t of any call is row t here
    for (size_t vi = 0; vi < vs.size(); ++vi) {
      double worst = 0;
      std::vector<float> row0;
      bool same = true;
      for (int n : {1, 2, max_n}) {
        reset_out(b, max_n);
        vs[vi].launch(b.x, w, out_for(b, s), n, s, nullptr);
        CK(cudaDeviceSynchronize());
        const auto got = read_out(b, s, n);
        if (row0.empty()) row0.assign(got.begin(), got.begin() + s.m);
        same = same && std::memcmp(row0.data(), got.data(), size_t(s.m) * 4) == 0;
        for (int t = 0; t < n; ++t)
          for (int r = 0; r < 64; ++r) {
            const double ref = exact.value[size_t(t) * 64 + r], mag = exact.magnitude[size_t(t) * 64 + r];
            const double err = std::fabs(got[size_t(t * s.m + r)] - ref);
            const double tol = (s.f32 ? (s.k / 8 + 3) * 0x1p-24 : 8e-3) * (mag + std::fabs(ref));
            worst = std::max(worst, err / (mag + 1e-30));
            if (!(err <= tol)) ok = false;
          }
      }
      // cuBLASLt promises no batch invariance; the few-row kernels do.
      if (vi > 0 && !same) ok = false;
      std::printf("validated %-20s %-4s worst error %.2e of the absolute sum, row 0 %s across 1/2/%d rows\n", s.name,
                  vs[vi].name.substr(0, 2).c_str(), worst, same ? "identical" : "DIFFERS", max_n);
    }
  }
  return ok;
}

// ---- the canonical order against the fastest ----

std::vector<Version> canonical_versions() {
  // c2 tunes per shape: against c3 it shows what the tuning takes.
  static Gemm fastest(GemmOrder::kFastest), lt_canonical(GemmOrder::kCanonical, 0), canonical(GemmOrder::kCanonical);
  auto version = [](const char* name, Gemm* g) {
    return Version{name, [g](const void* x, const void* w, void* out, int n, const Shape& s, cudaStream_t st) {
                     g->run(x, w, out, n, s.m, s.k, s.f32 ? GemmOut::f32 : GemmOut::bf16, s.accumulate, st);
                   }};
  };
  return {version("f0 fastest (production: streaming at 1 row, cuBLASLt's choice beyond)", &fastest),
          version("c1 canonical: cuBLASLt without split-K", &lt_canonical),
          version("c2 canonical: gemm_rows up to 64 rows, cuBLASLt without split-K beyond", &canonical),
          Version{"c3 canonical: gemm_rows alone",
                  [](const void* x, const void* w, void* out, int n, const Shape& s, cudaStream_t st) {
                    gemm_rows_bf16(x, w, out, n, s.m, s.k, s.f32 ? GemmOut::f32 : GemmOut::bf16, s.accumulate, st);
                  }}};
}

// Every canonical version against c1 bit for bit at every row count, row 0
// the same at every count, and against float64.
bool validate_canonical(const std::vector<Version>& vs, Buffers& b, const std::vector<int>& counts) {
  bool ok = true;
  const int max_n = *std::max_element(counts.begin(), counts.end());
  for (const Shape& s : kShapes) {
    const void* w = b.weights[&s - kShapes][0];
    const Reference exact = reference(b, s, w, max_n);
    std::vector<float> row0;
    for (int n : counts) {
      reset_out(b, max_n);
      vs[1].launch(b.x, w, out_for(b, s), n, s, nullptr);
      CK(cudaDeviceSynchronize());
      const auto want = read_out(b, s, n);
      for (size_t vi = 2; vi < vs.size(); ++vi) {
        reset_out(b, max_n);
        vs[vi].launch(b.x, w, out_for(b, s), n, s, nullptr);
        CK(cudaDeviceSynchronize());
        const auto got = read_out(b, s, n);
        size_t diff = 0;
        for (size_t j = 0; j < got.size(); ++j) diff += std::memcmp(&got[j], &want[j], 4) != 0;
        if (row0.empty()) row0.assign(got.begin(), got.begin() + s.m);
        const bool same_row0 = std::memcmp(row0.data(), got.data(), size_t(s.m) * 4) == 0;
        double worst = 0;
        for (int t = 0; t < n; ++t)
          for (int r = 0; r < 64; ++r) {
            const double ref = exact.value[size_t(t) * 64 + r], mag = exact.magnitude[size_t(t) * 64 + r];
            const double err = std::fabs(got[size_t(t * s.m + r)] - ref);
            const double tol = (s.f32 ? (s.k / 16 + 3) * 0x1p-24 : 8e-3) * (mag + std::fabs(ref));
            worst = std::max(worst, err / (mag + 1e-30));
            if (!(err <= tol)) ok = false;
          }
        ok = ok && diff == 0 && same_row0;
        std::printf("validated %-20s n=%-2d %s vs c1: %zu of %zu differ; row 0 %s; worst error %.2e of the absolute "
                    "sum\n",
                    s.name, n, vs[vi].name.substr(0, 2).c_str(), diff, got.size(),
                    same_row0 ? "as at the first count" : "DIFFERS", worst);
      }
    }
  }
  return ok;
}

int canonical_main(const std::vector<int>& row_counts, Buffers& b, double total_bytes) {
  auto all = canonical_versions();
  const bool ok = validate_canonical(all, b, row_counts);
  std::printf(ok ? "canonical products identical at every row count\n" : "VALIDATION FAILED\n");
  for (int n : row_counts) {
    std::printf("\n%d rows: %-72s %9s %9s %9s %9s %9s | %9s %9s\n", n, "version (us per product, GB/s)", "qkv", "o",
                "gate/up", "down", "head", "chain ms", "+spacers");
    for (const Version& v : all) {
      for (int si = 0; si < 5; ++si) v.launch(b.x, b.weights[si][0], out_for(b, kShapes[si]), n, kShapes[si], nullptr);
      CK(cudaDeviceSynchronize());
      time_version(v, b, n, 80);
    }
  }
  std::printf("\nchain: 32 layers x (qkv, o, gate/up, down) + head = %.2f GB; at 4.22 TB/s %.3f ms\n",
              total_bytes / 1e9, total_bytes / 4.22e12 * 1e3);
  return ok ? 0 : 1;
}

int rows_main(const std::vector<int>& row_counts, Buffers& b, double total_bytes) {
  auto all = rows_versions();
  const int max_n = *std::max_element(row_counts.begin(), row_counts.end());
  const bool ok = validate_rows(all, b, max_n);
  std::printf(ok ? "all versions within float64 bounds, few-row kernels batch-invariant\n" : "VALIDATION FAILED\n");
  for (int n : row_counts) {
    std::printf("\n%d rows: %-72s %9s %9s %9s %9s %9s | %9s %9s\n", n, "version (us per product, GB/s)", "qkv", "o",
                "gate/up", "down", "head", "chain ms", "+spacers");
    for (const Version& v : all) {
      // Plans and shared-memory limits set up before capture.
      for (int si = 0; si < 5; ++si) v.launch(b.x, b.weights[si][0], out_for(b, kShapes[si]), n, kShapes[si], nullptr);
      CK(cudaDeviceSynchronize());
      time_version(v, b, n, 80);
    }
  }
  std::printf("\nchain: 32 layers x (qkv, o, gate/up, down) + head = %.2f GB; at 4.22 TB/s %.3f ms\n",
              total_bytes / 1e9, total_bytes / 4.22e12 * 1e3);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const bool rows_mode = argc > 1 && std::strcmp(argv[1], "--rows") == 0;
  const bool canonical_mode = argc > 1 && std::strcmp(argv[1], "--canonical") == 0;
  const int only = argc > 1 && !rows_mode && !canonical_mode ? std::atoi(argv[1]) : 0;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs, L2 %d MB, dependent launch mode %d\n", prop.name, g_sms, prop.l2CacheSize >> 20,
              static_cast<int>(dependent_launch_mode()));

  Buffers b;
  double total_bytes = 0;
  for (int si = 0; si < 5; ++si) {
    const Shape& s = kShapes[si];
    const int copies = si == 4 ? 1 : kLayers;
    for (int l = 0; l < copies; ++l) {
      bf16* p;
      CK(cudaMalloc(&p, size_t(s.m * s.k * 2)));
      fill_kernel<<<1024, 256>>>(p, s.m * s.k, 1000u * si + l, 0.03f);
      b.weights[si].push_back(p);
      total_bytes += double(s.m * s.k * 2);
    }
  }
  CK(cudaMalloc(&b.x, 64 * 14336 * 2));
  fill_kernel<<<64, 256>>>(b.x, 64 * 14336, 7u, 1.0f);
  CK(cudaMalloc(&b.out_f32, 64 * 128256 * 4));
  CK(cudaMalloc(&b.out_bf16, 64 * 128256 * 2));
  CK(cudaMalloc(&b.spacer, 1024 * 4));
  CK(cudaMemset(b.spacer, 0, 1024 * 4));
  CK(cudaDeviceSynchronize());

  if (canonical_mode) {
    std::vector<int> counts;
    for (int i = 2; i < argc; ++i) counts.push_back(std::min(64, std::max(1, std::atoi(argv[i]))));
    if (counts.empty()) counts = {1, 2, 4, 8, 16, 32, 64};
    return canonical_main(counts, b, total_bytes);
  }
  if (rows_mode) {
    std::vector<int> counts;
    for (int i = 2; i < argc; ++i) counts.push_back(std::min(64, std::max(2, std::atoi(argv[i]))));
    if (counts.empty()) counts = {2, 4, 8, 16, 32, 64};
    return rows_main(counts, b, total_bytes);
  }

  auto all = versions();
  const bool ok = validate(all, b);
  std::printf(ok ? "all versions bit-identical to v1\n" : "VALIDATION FAILED\n");

  std::printf("\n%-78s %9s %9s %9s %9s %9s | %9s %9s\n", "version (us per product, GB/s in brackets)", "qkv", "o",
              "gate/up", "down", "head", "chain ms", "+spacers");
  for (size_t vi = 0; vi < all.size(); ++vi) {
    if (only != 0 && int(vi) + 1 != only && vi != 0) continue;
    time_version(all[vi], b, 1, 78);
  }
  std::printf("\nchain: 32 layers x (qkv, o, gate/up, down) + head = %.2f GB; at 4.22 TB/s %.3f ms\n",
              total_bytes / 1e9, total_bytes / 4.22e12 * 1e3);
  return ok ? 0 : 1;
}
