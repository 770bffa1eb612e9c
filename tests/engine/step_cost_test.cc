#include "engine/step_cost.h"

#include <gtest/gtest.h>

namespace exactly {
namespace {

TEST(StepCostModel, RecoversFixedAndPerTokenCost) {
  StepCostModel m;
  EXPECT_FALSE(m.fit().has_value());
  for (int i = 0; i < 200; ++i) {
    const int64_t n = 1 + (i * 7) % 40;
    m.observe(n, 0.006 + 0.0015 * static_cast<double>(n));
  }
  auto fit = m.fit();
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->fixed, 0.006, 1e-9);
  EXPECT_NEAR(fit->per_token, 0.0015, 1e-9);
}

TEST(StepCostModel, NoFitWhileStepSizesDoNotVary) {
  StepCostModel m;
  for (int i = 0; i < 100; ++i) m.observe(8, 0.02);
  EXPECT_FALSE(m.fit().has_value());
}

// Once learned, the slope outlives a stretch of one-size steps (speculation
// off): the decision must not fall back to its prior and draft at a loss.
TEST(StepCostModel, KeepsTheLastFitWhenStepSizesStopVarying) {
  StepCostModel m;
  for (int i = 0; i < 200; ++i) {
    const int64_t n = 4 + (i * 7) % 9;
    m.observe(n, 0.004 + 0.002 * static_cast<double>(n));
  }
  ASSERT_TRUE(m.fit().has_value());
  for (int i = 0; i < 1000; ++i) m.observe(4, 0.012);
  const auto fit = m.fit();
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->per_token, 0.002, 2e-4);
  EXPECT_NEAR(fit->fixed, 0.004, 1e-3);
}

// Speculation pays when verifying is cheap relative to a step and drafts are
// often accepted, and switches off when a large batch makes each verified
// token cost nearly a full token.
TEST(StepCostModel, DraftLengthFollowsCostAndAcceptance) {
  const StepCostModel::Fit fit{0.006, 0.0015};
  const double alone = relative_verify_cost(fit, 1);   // 0.2
  const double crowded = relative_verify_cost(fit, 64);  // ~0.94
  EXPECT_NEAR(alone, 0.0015 / 0.0075, 1e-12);
  EXPECT_GT(draft_length_for_cost(0.8, alone, 5), 0);
  EXPECT_EQ(draft_length_for_cost(0.8, crowded, 5), 0);
  EXPECT_EQ(draft_length_for_cost(0.1, alone, 5), 0);
  // Free verification and certain acceptance: draft as much as allowed.
  EXPECT_EQ(draft_length_for_cost(1.0, 0.0, 5), 5);
}

// A draft model's pass counts even while the steps are all of one size (no
// fit): then it is weighed against the mean step. Prompt lookup, which costs
// nothing to run, leaves the choice to the acceptance prior.
TEST(StepCostModel, SpeculationCostWithAndWithoutAFit) {
  StepCostModel steady;
  EXPECT_EQ(relative_speculation_cost(steady, 0.004, 1, 0.1), -1.0);  // nothing measured yet
  for (int i = 0; i < 100; ++i) steady.observe(2, 0.008);
  EXPECT_NEAR(relative_speculation_cost(steady, 0.004, 1, 0.1), 0.1 + 0.5, 1e-12);
  EXPECT_EQ(relative_speculation_cost(steady, 0.0, 1, 0.1), -1.0);
  EXPECT_EQ(relative_speculation_cost(steady, std::nullopt, 1, 0.1), -1.0);
  EXPECT_EQ(draft_length_for_cost(0.05, relative_speculation_cost(steady, 0.004, 1, 0.1), 5), 0);

  StepCostModel varied;
  for (int i = 0; i < 200; ++i) {
    const int64_t n = 1 + (i * 7) % 40;
    varied.observe(n, 0.006 + 0.0015 * static_cast<double>(n));
  }
  EXPECT_NEAR(relative_speculation_cost(varied, 0.003, 1, 0.1), (0.0015 + 0.003) / 0.0075, 1e-9);
}

// One plain step of n tokens then one verify with probe_draft_length(n)
// drafts per request is enough for a fit, for every batch size; one draft
// fewer per request is not (the probe is the fewest).
TEST(StepCostModel, OneProbeAfterOnePlainStepGivesAFit) {
  for (int64_t n = 1; n <= 64; ++n) {
    const int64_t k = probe_draft_length(n);
    StepCostModel m;
    m.observe(n, 0.01 + 0.001 * static_cast<double>(n));
    m.observe(n * (1 + k), 0.01 + 0.001 * static_cast<double>(n * (1 + k)));
    ASSERT_TRUE(m.fit().has_value()) << n;
    EXPECT_NEAR(m.fit()->per_token, 0.001, 1e-9) << n;
    if (k > 1) {
      StepCostModel fewer;
      fewer.observe(n, 0.01);
      fewer.observe(n * k, 0.01 + 0.001 * static_cast<double>(n * (k - 1)));
      EXPECT_FALSE(fewer.fit().has_value()) << n;
    }
  }
}

}  // namespace
}  // namespace exactly
