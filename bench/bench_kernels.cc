// Kernel micro-benchmark: matmul on the default model's shapes (SmolLM2-135M:
// Q4_1 layers, Q8_0 tied head) at 1 and 512 tokens with 1 and 2 threads,
// beside the machine's FMA peak and memory bandwidth measured in this run.
// Also a whole-model sweep over distinct weights (as a forward pass streams
// them), which is what decode speed depends on. Medians of repeats.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"
#include "kernels/ops.h"
#include "machine_peaks.h"

namespace exactly::bench {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes;  // [rows, row_bytes]
  kernels::WeightMatrix w;
};

// Random quants with valid fp16 scales (every stored block starts with d).
Matrix random_matrix(std::mt19937& rng, GGMLType type, int64_t rows, int64_t cols) {
  Matrix m;
  m.bytes.resize(static_cast<size_t>(rows * ggml_row_bytes(type, cols)));
  for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
  const auto& t = ggml_traits(type);
  const uint16_t scale = float_to_half(0.01f);
  for (size_t i = 0; i < m.bytes.size(); i += static_cast<size_t>(t.block_bytes)) {
    std::memcpy(&m.bytes[i], &scale, 2);
    if (type == GGMLType::Q4_1) std::memcpy(&m.bytes[i + 2], &scale, 2);
  }
  m.w = {type, m.bytes.data(), rows, cols};
  return m;
}

struct Shape {
  const char* name;
  GGMLType type;
  int64_t rows, cols;
};

constexpr Shape kShapes[] = {
    {"attn_q/o 576x576", GGMLType::Q4_1, 576, 576},   {"attn_k/v 192x576", GGMLType::Q4_1, 192, 576},
    {"ffn_gate/up 1536x576", GGMLType::Q4_1, 1536, 576}, {"ffn_down 576x1536", GGMLType::Q4_1, 576, 1536},
    {"head 49152x576 Q8_0", GGMLType::Q8_0, 49152, 576},
};

void bench_shapes(ThreadPool* pools[2], double peak[2]) {
  std::printf("\n%-22s %6s %4s %10s %9s %7s %8s\n", "matrix", "tokens", "thr", "time", "GFLOP/s", "%peak", "GB/s(w)");
  std::mt19937 rng(1);
  for (const Shape& s : kShapes) {
    Matrix m = random_matrix(rng, s.type, s.rows, s.cols);
    for (int64_t n : {int64_t{1}, int64_t{512}}) {
      std::vector<float> x(static_cast<size_t>(n * s.cols), 0.5f), y(static_cast<size_t>(n * s.rows));
      for (int p = 0; p < 2; ++p) {
        const int reps = n == 1 ? 201 : (s.rows > 10000 ? 3 : 11);
        const double sec =
            median_seconds(reps, [&] { kernels::matmul(m.w, x.data(), n, y.data(), *pools[p]); });
        const double gflops = 2.0 * static_cast<double>(s.rows * s.cols * n) / sec * 1e-9;
        std::printf("%-22s %6lld %4d %8.1fus %9.1f %6.0f%% %8.1f\n", s.name, static_cast<long long>(n),
                    pools[p]->size(), sec * 1e6, gflops, 100 * gflops / peak[p],
                    static_cast<double>(m.bytes.size()) / sec * 1e-9);
      }
    }
  }
}

// The 30 layers' matrices of the default model (q, k, v, o, gate, up, down),
// each layer with its own weights as a forward pass streams them.
std::vector<Matrix> layer_matrices(std::mt19937& rng) {
  const int kLayers = 30;
  std::vector<Matrix> mats;
  for (int l = 0; l < kLayers; ++l)
    for (auto [rows, cols] : {std::pair{576, 576}, std::pair{192, 576}, std::pair{192, 576}, std::pair{576, 576},
                              std::pair{1536, 576}, std::pair{1536, 576}, std::pair{576, 1536}})
      mats.push_back(random_matrix(rng, GGMLType::Q4_1, rows, cols));
  return mats;
}

// All matmuls of the model's forward pass.
void bench_model(ThreadPool* pools[2], double read_gbs[2]) {
  std::mt19937 rng(2);
  std::vector<Matrix> mats = layer_matrices(rng);
  Matrix head = random_matrix(rng, GGMLType::Q8_0, 49152, 576);
  size_t bytes = head.bytes.size();
  double macs = static_cast<double>(head.w.rows * head.w.cols);
  for (const auto& m : mats) {
    bytes += m.bytes.size();
    macs += static_cast<double>(m.w.rows * m.w.cols);
  }
  std::printf("\nwhole model: %zu matrices + head, %.1f MB of weights, %.1f M multiply-adds per token\n",
              mats.size(), static_cast<double>(bytes) * 1e-6, macs * 1e-6);
  std::vector<float> x(512 * 1536, 0.5f), y(static_cast<size_t>(512 * 49152));
  for (int p = 0; p < 2; ++p) {
    const double decode = median_seconds(21, [&] {
      for (const auto& m : mats) kernels::matmul(m.w, x.data(), 1, y.data(), *pools[p]);
      kernels::matmul(head.w, x.data(), 1, y.data(), *pools[p]);
    });
    std::printf("  decode  (1 token,  %d thr): %6.2f ms/token matmul -> %6.1f tokens/s; %5.1f GB/s = %3.0f%% of read bw\n",
                pools[p]->size(), decode * 1e3, 1 / decode, static_cast<double>(bytes) / decode * 1e-9,
                100 * static_cast<double>(bytes) / decode * 1e-9 / read_gbs[p]);
    const double prefill = median_seconds(3, [&] {
      for (const auto& m : mats) kernels::matmul(m.w, x.data(), 512, y.data(), *pools[p]);
      kernels::matmul(head.w, x.data(), 1, y.data(), *pools[p]);  // logits of the last token only
    });
    const double layer_macs = macs - static_cast<double>(head.w.rows * head.w.cols);
    std::printf("  prefill (512 tok, %d thr): %6.1f ms matmul -> %6.1f tokens/s; %5.1f GFLOP/s\n", pools[p]->size(),
                prefill * 1e3, 512 / prefill, 2 * 512 * layer_macs / prefill * 1e-9);
  }
}

// The matmuls of a speculative verify: every layer and the head (logits at
// every position) over 1 to 16 tokens, against one decode token. What a
// verified token costs beyond the step it rides on decides whether drafting
// pays (src/engine/step_cost.h learns the same curve at run time).
void bench_verify(ThreadPool& pool) {
  std::mt19937 rng(2);
  std::vector<Matrix> mats = layer_matrices(rng);
  mats.push_back(random_matrix(rng, GGMLType::Q8_0, 49152, 576));
  std::vector<float> x(16 * 1536, 0.5f), y(static_cast<size_t>(16 * 49152));
  std::printf("\nverify matmuls (all layers + head at every position, %d thr)\n", pool.size());
  std::printf("%6s %9s %12s %14s\n", "tokens", "ms", "x one token", "ms per extra");
  double one = 0;
  for (int64_t n = 1; n <= 16; ++n) {
    const double sec = median_seconds(15, [&] {
      for (const auto& m : mats) kernels::matmul(m.w, x.data(), n, y.data(), pool);
    });
    if (n == 1) one = sec;
    std::printf("%6lld %9.3f %12.2f %14.3f\n", static_cast<long long>(n), sec * 1e3, sec / one,
                n == 1 ? 0.0 : (sec - one) / static_cast<double>(n - 1) * 1e3);
  }
  // Where a verify's time goes: each shape's matmuls over all layers (the
  // head once), and their rate against the FMA peak.
  const double peak = peak_fma_gflops(pool);
  std::printf("\nper shape (ms over all layers; GFLOP/s, %% of the %.0f GFLOP/s FMA peak)\n", peak);
  std::printf("%-12s %7s %7s %7s\n", "shape", "1 tok", "5 tok", "9 tok");
  auto time_shape = [&](const std::vector<const Matrix*>& same) {
    const kernels::WeightMatrix& w0 = same.front()->w;
    std::printf("%5lldx%-6lld", static_cast<long long>(w0.rows), static_cast<long long>(w0.cols));
    for (int64_t n : {1, 5, 9}) {
      const double sec = median_seconds(15, [&] {
        for (const Matrix* m : same) kernels::matmul(m->w, x.data(), n, y.data(), pool);
      });
      const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(same.size()) *
                           static_cast<double>(w0.rows * w0.cols);
      std::printf(" %6.2fms %3.0f%%", sec * 1e3, 100 * flops / sec * 1e-9 / peak);
    }
    std::printf("\n");
  };
  const size_t per_layer = 7, layers = (mats.size() - 1) / per_layer;  // the head is last
  for (size_t j = 0; j < per_layer; ++j) {
    if (j > 0 && mats[j].w.rows == mats[j - 1].w.rows && mats[j].w.cols == mats[j - 1].w.cols)
      continue;  // k and v, gate and up: one line each
    std::vector<const Matrix*> same;
    for (size_t l = 0; l < layers; ++l) same.push_back(&mats[l * per_layer + j]);
    time_shape(same);
  }
  time_shape({&mats.back()});
}

// Attention of the default model's shape (9 heads over 3 KV heads, head_dim
// 64, block size 16, a shuffled block table): one 512-token prompt, one
// decode token at contexts 512, 2048 and 8192, and a 9-token speculative
// verify at contexts 160 and 512.
void bench_attention(ThreadPool* pools[2], double peak[2]) {
  const int n_heads = 9, n_kv = 3, hd = 64, block = 16, max_ctx = 8192;
  const int n_blocks = max_ctx / block;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> k(static_cast<size_t>(max_ctx * n_kv * hd)), v(k.size()),
      q(static_cast<size_t>(512 * n_heads * hd)), out(q.size());
  for (auto* a : {&k, &v, &q})
    for (auto& e : *a) e = u(rng);
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int32_t i = 0; i < n_blocks; ++i) table[static_cast<size_t>(i)] = (i * 37) % n_blocks;  // 37 is coprime to 512
  const kernels::PagedKV cache{k.data(), v.data(), n_blocks, block, n_kv, hd};
  std::printf("\nattention (9 heads / 3 KV heads, head_dim 64; 4 flop per head per (query, key) pair per dim)\n");
  struct Case {
    int n_new, ctx;
  };
  for (const Case c : {Case{512, 512}, Case{1, 512}, Case{1, 2048}, Case{1, 8192}, Case{9, 160}, Case{9, 512}}) {
    const int32_t qs[2] = {0, c.n_new}, len = c.ctx;
    const kernels::AttentionBatch b{1, qs, &len, table.data(), n_blocks};
    // (query, key) pairs per head: the new tokens are the context's last, causal.
    const double pairs = c.n_new * (c.ctx - c.n_new) + 0.5 * c.n_new * (c.n_new + 1.0);
    for (int p = 0; p < 2; ++p) {
      const double sec = median_seconds(c.n_new < 16 ? 101 : 9, [&] {
        kernels::attention(cache, b, q.data(), n_heads, 0.125f, out.data(), *pools[p]);
      });
      const double gflops = 4 * pairs * n_heads * hd / sec * 1e-9;
      std::printf("  %3d new tokens, context %4d, %d thr: %8.1f us per layer, %5.1f GFLOP/s = %3.0f%% of peak\n",
                  c.n_new, c.ctx, pools[p]->size(), sec * 1e6, gflops, 100 * gflops / peak[p]);
    }
  }
}

}  // namespace
}  // namespace exactly::bench

int main(int argc, char** argv) {
  using namespace exactly;
  const bool model_only = argc > 1 && std::string(argv[1]) == "--model";
  ThreadPool one(1), two(2);
  ThreadPool* pools[2] = {&one, &two};
  double peak[2], read_gbs[2];
  for (int p = 0; p < 2; ++p) {
    peak[p] = bench::peak_fma_gflops(*pools[p]);
    read_gbs[p] = bench::read_bandwidth_gbs(*pools[p]);
    std::printf("machine, %d thread(s): FMA peak %.1f GFLOP/s, read %.1f GB/s, copy %.1f GB/s\n", p + 1, peak[p],
                read_gbs[p], bench::copy_bandwidth_gbs(*pools[p]));
  }
  if (argc > 1 && std::string(argv[1]) == "--verify") {
    bench::bench_verify(two);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--attention") {
    bench::bench_attention(pools, peak);
    return 0;
  }
  if (!model_only) {
    bench::bench_shapes(pools, peak);
    bench::bench_attention(pools, peak);
  }
  bench::bench_model(pools, read_gbs);
  return 0;
}
