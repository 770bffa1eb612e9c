// The in-process all-reduce of tensor parallelism: every rank ends with the
// element-wise sum over the ranks taken in rank order ((r0 + r1) + r2 ...),
// which fp32 rounding tells apart from any other order; the same bits on
// every rank and in every repetition, whatever the threads' timing.
#include "model/collective.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace exactly {
namespace {

std::vector<std::vector<float>> partials(int ranks, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<std::vector<float>> out(static_cast<size_t>(ranks), std::vector<float>(static_cast<size_t>(n)));
  for (auto& r : out)
    for (float& v : r) v = std::ldexp(mantissa(rng), exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f);
  return out;
}

std::vector<std::vector<float>> reduce_on_threads(InProcessCollective& c, std::vector<std::vector<float>> data) {
  std::vector<std::thread> threads;
  for (int r = 0; r < c.size(); ++r)
    threads.emplace_back([&, r] { c.all_reduce_sum(data[static_cast<size_t>(r)].data(), static_cast<int64_t>(data[0].size()), r); });
  for (auto& t : threads) t.join();
  return data;
}

TEST(InProcessCollective, SumsInRankOrderWithTheSameBitsOnEveryRank) {
  for (int ranks : {1, 2, 3, 5}) {
    const int64_t n = 1031;  // not a multiple of the rank count
    const auto in = partials(ranks, n, static_cast<uint32_t>(ranks));
    InProcessCollective c(ranks);
    for (int repeat = 0; repeat < 20; ++repeat) {  // the same collective, reused, as a model's layers do
      const auto out = reduce_on_threads(c, in);
      for (int64_t i = 0; i < n; ++i) {
        float want = in[0][static_cast<size_t>(i)];
        for (int r = 1; r < ranks; ++r) want += in[static_cast<size_t>(r)][static_cast<size_t>(i)];
        for (int r = 0; r < ranks; ++r)
          ASSERT_EQ(std::memcmp(&out[static_cast<size_t>(r)][static_cast<size_t>(i)], &want, sizeof want), 0)
              << ranks << " ranks, element " << i << ", rank " << r;
      }
    }
  }
}

TEST(InProcessCollective, AnotherOrderGivesOtherBits) {
  // The check above could not pass with a different order of the sum: reversed, some elements differ.
  const auto in = partials(3, 1031, 9);
  int differ = 0;
  for (size_t i = 0; i < in[0].size(); ++i) {
    const float forward = (in[0][i] + in[1][i]) + in[2][i], backward = (in[2][i] + in[1][i]) + in[0][i];
    differ += std::memcmp(&forward, &backward, sizeof forward) != 0;
  }
  EXPECT_GT(differ, 50);
}

}  // namespace
}  // namespace exactly
