// The SwiGLU exponential: its error against float64 exp in ulps over the
// normal output range, the edges of fp32 (subnormals, +0, +inf, NaN), and the
// scalar and 8-lane versions agreeing bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/exp_fast.h"
#include "ulp.h"

namespace exactly::kernels::cpu {
namespace {

using testing::ulp_error;

std::vector<float> sample_inputs() {
  std::vector<float> xs;
  for (double x = -103.9; x <= 88.7; x += 1.0 / 2048) xs.push_back(static_cast<float>(x));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-103.9f, 88.7f), small(-1.0f, 1.0f), gate(-30.0f, 30.0f);
  for (int i = 0; i < 200000; ++i) {
    xs.push_back(wide(rng));
    xs.push_back(small(rng));
    xs.push_back(gate(rng));
  }
  return xs;
}

TEST(ExpFast, WithinOneUlpDownToTheSubnormals) {
  double worst = 0;
  float worst_x = 0;
  for (float x : sample_inputs()) {
    const double err = ulp_error(exp_fast(x), std::exp(static_cast<double>(x)));
    if (err > worst) worst = err, worst_x = x;
  }
  EXPECT_LE(worst, 1.0) << "at x = " << worst_x;  // measured 0.93 on a grid of 2^-16 (libm expf: 0.50)
}

TEST(ExpFast, EdgesOfTheRange) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_fast(0.0f), 1.0f);
  EXPECT_EQ(exp_fast(-inf), 0.0f);
  EXPECT_EQ(exp_fast(-200.0f), 0.0f);
  EXPECT_EQ(exp_fast(inf), inf);
  EXPECT_EQ(exp_fast(89.0f), inf);
  EXPECT_TRUE(std::isfinite(exp_fast(88.72f)));  // just below ln(FLT_MAX)
  EXPECT_TRUE(std::isnan(exp_fast(std::numeric_limits<float>::quiet_NaN())));
  const float sub = exp_fast(-95.0f);  // a subnormal result, not flushed
  EXPECT_GT(sub, 0.0f);
  EXPECT_LT(sub, std::numeric_limits<float>::min());
  EXPECT_NEAR(sub, std::exp(-95.0), 2 * std::numeric_limits<float>::denorm_min());
}

#if EXACTLY_KERNELS_AVX2
TEST(ExpFast, ScalarAndVectorGiveTheSameBits) {
  std::vector<float> xs = sample_inputs();
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, -inf, inf, 89.0f, -200.0f, 88.72f, -95.0f, std::numeric_limits<float>::quiet_NaN()})
    xs.push_back(x);
  while (xs.size() % 8 != 0) xs.push_back(1.0f);
  for (size_t i = 0; i < xs.size(); i += 8) {
    float lanes[8];
    _mm256_storeu_ps(lanes, exp_fast(_mm256_loadu_ps(&xs[i])));
    for (int j = 0; j < 8; ++j) {
      const float scalar = exp_fast(xs[i + j]);
      ASSERT_EQ(std::memcmp(&lanes[j], &scalar, sizeof scalar), 0) << "x = " << xs[i + j];
    }
  }
}
#endif

}  // namespace
}  // namespace exactly::kernels::cpu
