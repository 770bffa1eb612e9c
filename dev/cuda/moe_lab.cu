// Lab: the mixture-of-experts kernels (kernels/cuda/moe.h) against
// references, and what they cost beside the dense products of the same
// active width.
//   1. Routing: each token's experts and weights against a host reference
//      (the k largest logits, the lower index first among equal ones, which
//      the logits are drawn to contain; weights the softmax of the chosen k
//      in double); the groups: every (token, choice) has one row, the row
//      takes its token's input, each expert's rows are one contiguous run and
//      the tiles cover exactly the rows.
//   2. The experts' products bit for bit against Gemm in canonical order
//      (gemm.h) over each expert's rows gathered into a contiguous input: the
//      same order, so the same bits, at every row count.
//   3. The combine against a host reference in the same order (float fma).
//   4. Time of route + gate_up + SwiGLU + down + combine, against the dense
//      products of the same active width (gate_up [2 k F, D], down [D, k F])
//      in canonical order, both captured as graphs.
//
//   moe_lab [qwen3-30b-a3b | mixtral | small] [N ...]   (N: tokens; default 1 8 64 512)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layer_ops.h"
#include "kernels/cuda/moe.h"
#include "lab_common.h"

namespace {

using namespace exactly::kernels::cuda;
using bf16 = __nv_bfloat16;

struct Shape {
  const char* name;
  int dim, ffn, experts, chosen;
};

constexpr Shape kShapes[] = {{"qwen3-30b-a3b", 2048, 768, 128, 8}, {"mixtral", 4096, 14336, 8, 2},
                             {"small", 256, 192, 16, 4}};

template <class T>
std::vector<T> download(const void* p, size_t n) {
  std::vector<T> v(n);
  CK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// Router logits with ties: a quarter of each token's logits repeat another's.
std::vector<float> router_logits(int64_t n, int experts, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> pick(0, experts - 1);
  std::vector<float> l(static_cast<size_t>(n * experts));
  for (int64_t t = 0; t < n; ++t) {
    float* row = l.data() + t * experts;
    for (int e = 0; e < experts; ++e) row[e] = normal(rng);
    for (int i = 0; i < experts / 4; ++i) row[pick(rng)] = row[pick(rng)];
  }
  return l;
}

// The host's route of one token (model/moe_mlp.cc's rule).
void host_route(const float* logits, int experts, int k, std::vector<int>& chosen, std::vector<float>& weight) {
  std::vector<int> order(static_cast<size_t>(experts));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  std::sort(order.begin(), order.begin() + k);
  double top = -INFINITY, sum = 0;
  std::vector<double> ex(static_cast<size_t>(k));
  for (int j = 0; j < k; ++j) top = std::max(top, static_cast<double>(logits[order[j]]));
  for (int j = 0; j < k; ++j) sum += ex[j] = std::exp(static_cast<double>(logits[order[j]]) - top);
  chosen.assign(order.begin(), order.begin() + k);
  weight.resize(static_cast<size_t>(k));
  for (int j = 0; j < k; ++j) weight[j] = static_cast<float>(ex[j] / sum);
}

struct Buffers {
  void* h;           // bf16 [n, D]
  void* w_gate_up;   // bf16 [E, 2F, D]
  void* w_down;      // bf16 [E, D, F]
  float* logits;     // [n, E]
  void* routes;
  void* gate_up;     // bf16 [n k, 2F]
  void* act;         // bf16 [n k, F]
  float* out;        // [n k, D]
  float* x;          // [n, D]
};

int check(const Shape& s, int64_t n, const Buffers& b, const MoeRoutes& r, Gemm& gemm, std::mt19937& rng) {
  const int E = s.experts, k = s.chosen, D = s.dim, F = s.ffn;
  const int64_t rows = n * k;
  int failures = 0;
  auto fail = [&](const char* what, long long a, long long c) {
    if (failures++ < 8) std::printf("  FAIL %s (%lld, %lld)\n", what, a, c);
  };
  // 1. routing and groups
  const std::vector<float> logits = router_logits(n, E, rng);
  CK(cudaMemcpy(b.logits, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
  moe_route(b.logits, n, E, k, r, nullptr);
  CK(cudaDeviceSynchronize());
  const auto chosen = download<int32_t>(r.chosen, rows), row_of = download<int32_t>(r.row_of, rows),
             token_of_row = download<int32_t>(r.token_of_row, rows);
  const auto weight = download<float>(r.weight, rows);
  const int tiles = download<int32_t>(r.tile_count, 1)[0];
  const auto tile = download<int32_t>(r.tiles, static_cast<size_t>(std::max(tiles, 1)) * 3);
  std::vector<int> hc;
  std::vector<float> hw;
  int weight_ulps = 0;
  for (int64_t t = 0; t < n; ++t) {
    host_route(logits.data() + t * E, E, k, hc, hw);
    for (int j = 0; j < k; ++j) {
      const int64_t i = t * k + j;
      if (chosen[i] != hc[j]) fail("chosen expert (token, choice)", t, j);
      if (weight[i] != hw[j]) {
        int32_t a, c;
        std::memcpy(&a, &weight[i], 4);
        std::memcpy(&c, &hw[j], 4);
        if (std::abs(a - c) > 1) fail("weight beyond 1 ulp (token, choice)", t, j);
        ++weight_ulps;
      }
      if (row_of[i] < 0 || row_of[i] >= rows || token_of_row[row_of[i]] != t) fail("row of (token, choice)", t, j);
    }
  }
  std::vector<int> covered(static_cast<size_t>(rows), 0), first(E, -1), last(E, -1);
  for (int64_t i = 0; i < rows; ++i) {
    const int e = chosen[i], row = row_of[i];
    first[e] = first[e] < 0 ? row : std::min(first[e], row);
    last[e] = std::max(last[e], row);
  }
  for (int i = 0; i < tiles; ++i) {
    const int e = tile[3 * i], r0 = tile[3 * i + 1], r1 = tile[3 * i + 2];
    if (r1 - r0 < 1 || r1 - r0 > kMoeTileRows || r0 < first[e] || r1 - 1 > last[e]) fail("tile (index, expert)", i, e);
    for (int row = r0; row < r1; ++row) ++covered[static_cast<size_t>(row)];
  }
  for (int64_t row = 0; row < rows; ++row)
    if (covered[static_cast<size_t>(row)] != 1) fail("row covered (row, times)", row, covered[row]);
  if (tiles > moe_max_tiles(n, k, E)) fail("tiles beyond the bound (tiles, bound)", tiles, moe_max_tiles(n, k, E));

  // 2. the products against Gemm (canonical) per expert
  moe_products({b.h, true, b.w_gate_up, b.gate_up, GemmOut::bf16, n, k, E, 2 * int64_t{F}, D}, r, nullptr);
  swiglu(b.gate_up, rows, F, b.act, nullptr);
  moe_products({b.act, false, b.w_down, b.out, GemmOut::f32, n, k, E, D, F}, r, nullptr);
  CK(cudaDeviceSynchronize());
  const auto gate_up = download<uint16_t>(b.gate_up, static_cast<size_t>(rows) * 2 * F);
  const auto out = download<float>(b.out, static_cast<size_t>(rows) * D);
  const auto h = download<uint16_t>(b.h, static_cast<size_t>(n) * D);
  const auto act = download<uint16_t>(b.act, static_cast<size_t>(rows) * F);
  int64_t differ_gate_up = 0, differ_down = 0;
  void *xin, *xact, *ref_gu;
  float* ref_out;
  CK(cudaMalloc(&xin, static_cast<size_t>(rows) * D * 2));
  CK(cudaMalloc(&xact, static_cast<size_t>(rows) * F * 2));
  CK(cudaMalloc(&ref_gu, static_cast<size_t>(rows) * 2 * F * 2));
  CK(cudaMalloc(&ref_out, static_cast<size_t>(rows) * D * 4));
  std::vector<std::vector<int>> rows_of(static_cast<size_t>(E));
  for (int64_t i = 0; i < rows; ++i) rows_of[static_cast<size_t>(chosen[i])].push_back(row_of[i]);
  for (int e = 0; e < E; ++e) {
    const std::vector<int>& mine = rows_of[static_cast<size_t>(e)];
    if (mine.empty()) continue;
    const int64_t m = static_cast<int64_t>(mine.size());
    std::vector<uint16_t> in(static_cast<size_t>(m) * D), a(static_cast<size_t>(m) * F);
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(&in[i * D], &h[static_cast<size_t>(token_of_row[mine[i]]) * D], D * 2);
      std::memcpy(&a[i * F], &act[static_cast<size_t>(mine[i]) * F], F * 2);
    }
    CK(cudaMemcpy(xin, in.data(), in.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(xact, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    const auto* wgu = static_cast<const uint8_t*>(b.w_gate_up) + static_cast<size_t>(e) * 2 * F * D * 2;
    const auto* wd = static_cast<const uint8_t*>(b.w_down) + static_cast<size_t>(e) * D * F * 2;
    gemm.run(xin, wgu, ref_gu, m, 2 * int64_t{F}, D, GemmOut::bf16, false, nullptr);
    gemm.run(xact, wd, ref_out, m, D, F, GemmOut::f32, false, nullptr);
    CK(cudaDeviceSynchronize());
    const auto rgu = download<uint16_t>(ref_gu, static_cast<size_t>(m) * 2 * F);
    const auto rout = download<float>(ref_out, static_cast<size_t>(m) * D);
    for (int64_t i = 0; i < m; ++i) {
      differ_gate_up += std::memcmp(&rgu[i * 2 * F], &gate_up[static_cast<size_t>(mine[i]) * 2 * F], 4 * F) != 0;
      differ_down += std::memcmp(&rout[i * D], &out[static_cast<size_t>(mine[i]) * D], 4 * D) != 0;
    }
  }
  if (differ_gate_up) fail("gate_up rows not the canonical bits (rows, of)", differ_gate_up, rows);
  if (differ_down) fail("down rows not the canonical bits (rows, of)", differ_down, rows);
  CK(cudaFree(xin));
  CK(cudaFree(xact));
  CK(cudaFree(ref_gu));
  CK(cudaFree(ref_out));

  // 3. the combine
  std::vector<float> x0(static_cast<size_t>(n) * D);
  for (auto& v : x0) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  CK(cudaMemcpy(b.x, x0.data(), x0.size() * 4, cudaMemcpyHostToDevice));
  moe_combine(b.out, r, n, k, D, b.x, nullptr);
  const auto x = download<float>(b.x, x0.size());
  int64_t differ_x = 0;
  for (int64_t t = 0; t < n; ++t)
    for (int d = 0; d < D; ++d) {
      float sum = 0.f;
      for (int j = 0; j < k; ++j) sum = std::fma(weight[t * k + j], out[static_cast<size_t>(row_of[t * k + j]) * D + d], sum);
      differ_x += x[t * D + d] != x0[t * D + d] + sum;
    }
  if (differ_x) fail("combined values off the host's (values, of)", differ_x, n * D);
  std::printf("  %lld tokens: %d tiles, weights within 1 ulp of the host's at %d of %lld, %s\n",
              static_cast<long long>(n), tiles, static_cast<int>(rows) - weight_ulps, static_cast<long long>(rows),
              failures ? "FAILED" : "routes, groups, canonical bits and combine OK");
  return failures;
}

void time_step(const Shape& s, int64_t n, const Buffers& b, const MoeRoutes& r, Gemm& gemm) {
  const int E = s.experts, k = s.chosen, D = s.dim, F = s.ffn;
  void* router;
  CK(cudaMalloc(&router, static_cast<size_t>(E) * D * 2));
  fill_uniform_bf16(router, int64_t{E} * D, 0.05f, 99, nullptr);
  gemm.prepare(b.h, router, n, E, D, GemmOut::f32, false, nullptr);
  // The dense products of the same active width read the first k experts' weights as one matrix.
  gemm.prepare(b.h, b.w_gate_up, n, 2 * int64_t{k} * F, D, GemmOut::bf16, false, nullptr);
  gemm.prepare(b.act, b.w_down, n, D, int64_t{k} * F, GemmOut::f32, true, nullptr);
  CK(cudaDeviceSynchronize());
  const float moe_ms = time_graph([&](cudaStream_t st) {
    gemm.run(b.h, router, b.logits, n, E, D, GemmOut::f32, false, st);
    moe_route(b.logits, n, E, k, r, st);
    moe_products({b.h, true, b.w_gate_up, b.gate_up, GemmOut::bf16, n, k, E, 2 * int64_t{F}, D}, r, st);
    swiglu(b.gate_up, n * k, F, b.act, st);
    moe_products({b.act, false, b.w_down, b.out, GemmOut::f32, n, k, E, D, F}, r, st);
    moe_combine(b.out, r, n, k, D, b.x, st);
  });
  const float dense_ms = time_graph([&](cudaStream_t st) {
    gemm.run(b.h, b.w_gate_up, b.gate_up, n, 2 * int64_t{k} * F, D, GemmOut::bf16, false, st);
    swiglu(b.gate_up, n, k * F, b.act, st);
    gemm.run(b.act, b.w_down, b.x, n, D, int64_t{k} * F, GemmOut::f32, true, st);
  });
  // Bytes of the experts' weights a step reads: each distinct chosen expert once.
  std::printf("  %5lld tokens: experts %.4f ms, dense of the active width %.4f ms (x%.2f)\n", static_cast<long long>(n),
              moe_ms, dense_ms, moe_ms / dense_ms);
  CK(cudaFree(router));
}

}  // namespace

int main(int argc, char** argv) {
  const Shape* shape = &kShapes[0];
  std::vector<int64_t> ns;
  for (int i = 1; i < argc; ++i) {
    bool named = false;
    for (const Shape& s : kShapes)
      if (std::strcmp(argv[i], s.name) == 0) shape = &s, named = true;
    if (!named) ns.push_back(std::atoll(argv[i]));
  }
  if (ns.empty()) ns = {1, 8, 64, 512};
  const Shape& s = *shape;
  const int64_t max_n = *std::max_element(ns.begin(), ns.end());
  const int64_t rows = max_n * s.chosen;
  std::printf("%s: dim %d, %d experts of width %d, %d a token\n", s.name, s.dim, s.experts, s.ffn, s.chosen);
  Buffers b{};
  CK(cudaMalloc(&b.h, static_cast<size_t>(max_n) * s.dim * 2));
  CK(cudaMalloc(&b.w_gate_up, static_cast<size_t>(s.experts) * 2 * s.ffn * s.dim * 2));
  CK(cudaMalloc(&b.w_down, static_cast<size_t>(s.experts) * s.dim * s.ffn * 2));
  CK(cudaMalloc(&b.logits, static_cast<size_t>(max_n) * s.experts * 4));
  CK(cudaMalloc(&b.routes, moe_routes_bytes(max_n, s.chosen, s.experts)));
  CK(cudaMalloc(&b.gate_up, static_cast<size_t>(rows) * 2 * s.ffn * 2));
  CK(cudaMalloc(&b.act, static_cast<size_t>(rows) * s.ffn * 2));
  CK(cudaMalloc(&b.out, static_cast<size_t>(rows) * s.dim * 4));
  CK(cudaMalloc(&b.x, static_cast<size_t>(max_n) * s.dim * 4));
  fill_uniform_bf16(b.h, max_n * s.dim, 1.0f, 1, nullptr);
  fill_uniform_bf16(b.w_gate_up, int64_t{s.experts} * 2 * s.ffn * s.dim, 1.0f / std::sqrt(float(s.dim)), 2, nullptr);
  fill_uniform_bf16(b.w_down, int64_t{s.experts} * s.dim * s.ffn, 1.0f / std::sqrt(float(s.ffn)), 3, nullptr);
  CK(cudaDeviceSynchronize());
  Gemm gemm(GemmOrder::kCanonical);
  std::mt19937 rng(7);
  int failures = 0;
  std::printf("checks:\n");
  for (int64_t n : ns) {
    const MoeRoutes r = moe_routes_at(b.routes, n, s.chosen, s.experts);
    failures += check(s, n, b, r, gemm, rng);
  }
  std::printf("time (graphs, median of 20):\n");
  for (int64_t n : ns) time_step(s, n, b, moe_routes_at(b.routes, n, s.chosen, s.experts), gemm);
  std::printf("%s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
