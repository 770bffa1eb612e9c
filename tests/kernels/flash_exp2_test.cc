// The attention exponential: its error against float64 exp2 in ulps over the
// whole normal output range, its exact points, and the scalar and 8-lane
// versions agreeing bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/flash_exp2.h"
#include "ulp.h"

namespace exactly::kernels::cpu {
namespace {

using testing::ulp_error;

std::vector<float> sample_inputs() {
  std::vector<float> xs;
  for (double x = -126.0; x <= 127.0; x += 1.0 / 4096) xs.push_back(static_cast<float>(x));  // dense grid
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-126.0f, 127.0f), small(-1.0f, 1.0f);
  for (int i = 0; i < 200000; ++i) {
    xs.push_back(u(rng));
    xs.push_back(small(rng));
  }
  return xs;
}

TEST(FlashExp2, WithinOneUlpOverTheNormalRange) {
  double worst = 0;
  float worst_x = 0;
  for (const float x : sample_inputs()) {
    const double err = ulp_error(exp2_fast(x), std::exp2(static_cast<double>(x)));
    if (err > worst) worst = err, worst_x = x;
  }
  EXPECT_LE(worst, 1.0) << "at x = " << worst_x;
  EXPECT_GT(worst, 0.0);  // the grid is fine enough to see rounding at all
}

TEST(FlashExp2, ExactPointsAndLimits) {
  EXPECT_EQ(exp2_fast(0.0f), 1.0f);  // the online softmax relies on exp2(m - m) == 1
  for (int n = -126; n <= 127; ++n) EXPECT_EQ(exp2_fast(static_cast<float>(n)), std::ldexp(1.0f, n)) << n;
  EXPECT_EQ(exp2_fast(-std::numeric_limits<float>::infinity()), 0.0f);  // masked keys weigh nothing
  EXPECT_EQ(exp2_fast(-200.0f), 0.0f);
  EXPECT_EQ(exp2_fast(-126.6f), 0.0f);
  EXPECT_GT(exp2_fast(-126.4f), 0.0f);
}

#if EXACTLY_KERNELS_AVX2
TEST(FlashExp2, VectorAndScalarGiveTheSameBits) {
  std::vector<float> xs = sample_inputs();
  xs.push_back(-std::numeric_limits<float>::infinity());
  xs.push_back(-1000.0f);
  xs.push_back(126.9f);
  while (xs.size() % 8) xs.push_back(0.5f);
  for (size_t i = 0; i < xs.size(); i += 8) {
    float v[8];
    _mm256_storeu_ps(v, exp2_fast(_mm256_loadu_ps(&xs[i])));
    for (size_t j = 0; j < 8; ++j) {
      const float s = exp2_fast(xs[i + j]);
      ASSERT_EQ(std::memcmp(&s, &v[j], sizeof s), 0) << "x = " << xs[i + j];
    }
  }
}
#endif

}  // namespace
}  // namespace exactly::kernels::cpu
