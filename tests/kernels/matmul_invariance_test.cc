// Batch and thread invariance of matmul: a token's outputs are bit-identical
// whatever else is in the call, where it falls in a tile, and how many
// threads ran, across the fused (up to 10 tokens) and tiled (more) paths.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kernels/ops.h"
#include "random_weights.h"

namespace exactly::kernels {
namespace {

class MatmulInvariance : public ::testing::TestWithParam<GGMLType> {};

TEST_P(MatmulInvariance, TokenRowsDoNotDependOnBatchOrThreads) {
  const GGMLType type = GetParam();
  const int64_t cols = ggml_traits(type).block_elems == 256 ? 768 : 576;
  const int64_t rows = 83;  // not a multiple of any tile
  std::mt19937 rng(11);
  auto w = testing::random_weights(rng, type, rows, cols);
  const int64_t max_tokens = 200;
  auto x = testing::random_floats(rng, max_tokens * cols);

  // Each token alone, one thread: the baseline.
  ThreadPool one(1), two(2);
  std::vector<float> alone(static_cast<size_t>(max_tokens * rows));
  for (int64_t t = 0; t < max_tokens; ++t) matmul(w.matrix, x.data() + t * cols, 1, alone.data() + t * rows, one);

  for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 17, 21, 64, 97, 100, 200}) {
    for (ThreadPool* pool : {&one, &two}) {
      // Batches starting at different offsets put each token at a different
      // place within a micro-tile and a token block.
      for (int64_t first : {int64_t{0}, max_tokens - n}) {
        std::vector<float> y(static_cast<size_t>(n * rows));
        matmul(w.matrix, x.data() + first * cols, n, y.data(), *pool);
        for (int64_t t = 0; t < n; ++t)
          ASSERT_EQ(std::memcmp(y.data() + t * rows, alone.data() + (first + t) * rows, rows * sizeof(float)), 0)
              << ggml_type_name(type) << " n_tokens " << n << " token " << t << " threads " << pool->size();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulInvariance,
                         ::testing::Values(GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q8_0, GGMLType::F32,
                                           GGMLType::F16, GGMLType::BF16, GGMLType::Q4_K, GGMLType::Q6_K),
                         [](const auto& p) { return std::string(ggml_type_name(p.param)); });

}  // namespace
}  // namespace exactly::kernels
