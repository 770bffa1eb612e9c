// Matmul accuracy: every SIMD path against the scalar reference (bit for bit:
// both follow reduction_order.h) and against a float64 dot of the
// dequantised weights (within the fp32 accumulation bound).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include "kernels/ops.h"
#include "random_weights.h"

namespace exactly::kernels {
namespace {

using testing::random_floats;
using testing::random_weights;

struct Shape {
  int64_t rows, cols, n_tokens;
};

void check_matmul(GGMLType type, Shape s, int threads, uint32_t seed) {
  std::mt19937 rng(seed);
  auto w = random_weights(rng, type, s.rows, s.cols);
  auto x = random_floats(rng, s.n_tokens * s.cols);
  std::vector<float> y(static_cast<size_t>(s.n_tokens * s.rows)), y_ref(y.size());
  ThreadPool pool(threads);
  matmul(w.matrix, x.data(), s.n_tokens, y.data(), pool);
  reference::matmul(w.matrix, x.data(), s.n_tokens, y_ref.data());
  // Bound of an fp32 sum whose every lane chains cols/8 FMAs and then folds
  // through 3 additions: |y - exact| <= (cols/8 + 3) * u * sum|w x|, u = 2^-24.
  const double u = std::ldexp(1.0, -24);
  const double gamma = (static_cast<double>(s.cols) / 8 + 3) * u * 1.01;
  for (int64_t r = 0; r < s.rows; ++r) {
    const auto row = testing::dequantized_row(w.matrix, r);
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      double exact = 0, magnitude = 0;
      for (int64_t k = 0; k < s.cols; ++k) {
        const double p = static_cast<double>(row[static_cast<size_t>(k)]) * x[static_cast<size_t>(t * s.cols + k)];
        exact += p;
        magnitude += std::fabs(p);
      }
      const size_t i = static_cast<size_t>(t * s.rows + r);
      ASSERT_EQ(std::memcmp(&y[i], &y_ref[i], sizeof(float)), 0)
          << ggml_type_name(type) << " row " << r << " token " << t << ": " << y[i] << " vs reference " << y_ref[i];
      ASSERT_LE(std::fabs(y[i] - exact), gamma * magnitude)
          << ggml_type_name(type) << " row " << r << " token " << t << " exact " << exact;
    }
  }
}

class MatmulAllTypes : public ::testing::TestWithParam<GGMLType> {};

TEST_P(MatmulAllTypes, MatchesReferenceBitwiseAndFloat64WithinBound) {
  const GGMLType type = GetParam();
  const bool k_quant = ggml_traits(type).block_elems == 256;
  const std::vector<int64_t> cols = k_quant ? std::vector<int64_t>{256, 512, 1536} : std::vector<int64_t>{32, 96, 576, 1536};
  uint32_t seed = 1;
  for (int64_t k : cols)
    for (int64_t rows : {1, 3, 17, 33, 100, 257})
      for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 17, 100})
        for (int threads : {1, 2}) {
          if (k >= 1536 && (rows > 33 || n > 17)) continue;  // keep the float64 loop short
          check_matmul(type, {rows, k, n}, threads, seed++);
        }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulAllTypes,
                         ::testing::Values(GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q8_0, GGMLType::F32,
                                           GGMLType::F16, GGMLType::BF16, GGMLType::Q4_K, GGMLType::Q5_K,
                                           GGMLType::Q6_K),
                         [](const auto& p) { return std::string(ggml_type_name(p.param)); });

TEST(Matmul, ModelShapesMatchReference) {
  // The shapes of the default model, including a token count that spans
  // several token blocks of the tiled path.
  for (auto [type, rows, cols] : {std::tuple{GGMLType::Q4_1, 1536, 576}, std::tuple{GGMLType::Q4_1, 576, 1536},
                                  std::tuple{GGMLType::Q8_0, 200, 576}}) {
    std::mt19937 rng(7);
    auto w = random_weights(rng, type, rows, cols);
    auto x = random_floats(rng, 200 * int64_t{cols}, -4.0f, 4.0f);
    std::vector<float> y(static_cast<size_t>(200 * rows)), y_ref(y.size());
    ThreadPool pool(2);
    matmul(w.matrix, x.data(), 200, y.data(), pool);
    reference::matmul(w.matrix, x.data(), 200, y_ref.data());
    ASSERT_EQ(std::memcmp(y.data(), y_ref.data(), y.size() * sizeof(float)), 0) << ggml_type_name(type);
  }
}

}  // namespace
}  // namespace exactly::kernels
