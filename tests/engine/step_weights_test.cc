#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "bench_tools/throughput_report.h"

namespace exactly::bench_tools {
namespace {

// The expected bytes a step reads against routes drawn as a router would
// draw them (k distinct experts a token, uniformly): 20,000 steps simulated.
double simulated_read(const StepWeights& w, int batch, std::mt19937& rng) {
  const int trials = 20000;
  std::vector<int> experts(static_cast<size_t>(w.n_experts));
  double distinct = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<bool> read(static_cast<size_t>(w.n_experts), false);
    for (int b = 0; b < batch; ++b) {
      std::iota(experts.begin(), experts.end(), 0);
      std::shuffle(experts.begin(), experts.end(), rng);
      for (int j = 0; j < w.experts_used; ++j) read[static_cast<size_t>(experts[static_cast<size_t>(j)])] = true;
    }
    distinct += static_cast<double>(std::count(read.begin(), read.end(), true));
  }
  const double share = distinct / trials / w.n_experts;
  return static_cast<double>(w.weight_bytes - w.expert_bytes) + share * static_cast<double>(w.expert_bytes);
}

TEST(StepWeights, DenseModelsReadEveryWeight) {
  const StepWeights dense{1000, 0, 0, 0};
  EXPECT_EQ(dense.read_by(1), 1000.0);
  EXPECT_EQ(dense.read_by(64), 1000.0);
}

TEST(StepWeights, ExpertsReadAreThoseSomeTokenChooses) {
  std::mt19937 rng(3);
  const StepWeights w{1'000'000, 800'000, 16, 4};
  EXPECT_DOUBLE_EQ(w.read_by(1), 200'000 + 800'000 * 4.0 / 16);
  for (int batch : {1, 2, 5, 32}) {
    // The simulation's standard error is below 0.2% of the experts' bytes.
    EXPECT_NEAR(w.read_by(batch), simulated_read(w, batch, rng), 0.006 * 800'000) << batch << " tokens";
  }
  EXPECT_LT(w.read_by(64), 1'000'000.0);
  EXPECT_GT(w.read_by(64), 999'000.0);
}

}  // namespace
}  // namespace exactly::bench_tools
