#include "engine/step_cost.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "speculative/acceptance_stats.h"

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
  // A draft model's pass over the batch counts with the verify's token.
  EXPECT_NEAR(relative_verify_cost(fit, 1, 0.003), (0.0015 + 0.003) / 0.0075, 1e-12);
  EXPECT_GT(draft_length_for_cost(0.8, alone, 5), 0);
  EXPECT_EQ(draft_length_for_cost(0.8, crowded, 5), 0);
  EXPECT_EQ(draft_length_for_cost(0.1, alone, 5), 0);
  // Free verification and certain acceptance: draft as much as allowed.
  EXPECT_EQ(draft_length_for_cost(1.0, 0.0, 5), 5);
}

// k maximises tokens per unit of cost, E(k) / (1 + k c), and is 0 where no k
// beats a plain step's one token for one unit.
TEST(StepCostModel, DraftLengthMaximisesTokensPerCost) {
  // a = 0.5, c = 0.1: 1.5/1.1 = 1.364, 1.75/1.2 = 1.458, 1.875/1.3 = 1.442.
  EXPECT_EQ(draft_length_for_cost(0.5, 0.1, 8), 2);
  // a = 0.9: still rising at k = 8 (6.13/1.8 = 3.40 > 5.70/1.7 = 3.35).
  EXPECT_EQ(draft_length_for_cost(0.9, 0.1, 8), 8);
  EXPECT_EQ(draft_length_for_cost(1.0, 0.1, 8), 8);
  // a = 0.05: one draft gives 1.05 tokens for 1.1 units, less than a plain step.
  EXPECT_EQ(draft_length_for_cost(0.05, 0.1, 8), 0);
  // A draft model costing 0.3 of a step per token (0.4 in all) at a = 0.9:
  // 1.357, 1.506, 1.563, 1.575, 1.562 for k = 1..5.
  EXPECT_EQ(draft_length_for_cost(0.9, 0.4, 8), 4);
  // A predicted gain within the margin is not worth drafting for: a = 0.12 at
  // c = 0.07 gives 1.12/1.07 = 1.047 for k = 1 (and less for more).
  EXPECT_EQ(draft_length_for_cost(0.12, 0.07, 8), 0);
  EXPECT_EQ(draft_length_for_cost(0.13, 0.07, 8), 1);  // 1.13/1.07 = 1.056
  // Monotone in the acceptance rate.
  int32_t previous = 0;
  for (int i = 0; i <= 100; ++i) {
    const int32_t k = draft_length_for_cost(i / 100.0, 0.1, 8);
    EXPECT_GE(k, previous) << i;
    previous = k;
  }
}

// The engine's rule (Engine::propose_drafts) for a request drafting alone: its
// recent acceptance shrunk towards the pooled rate of all drafts, then
// draft_length_for_cost. Drafts that pass grow k to the cap; drafts that fail
// never grow it and, once the pooled rate has fallen too, stop drafting;
// drafts that pass again bring it back to the cap.
TEST(StepCostModel, DraftLengthShrinksOnFailuresAndGrowsOnSuccesses) {
  const double cost = 0.3;
  const int32_t k_max = 6;
  AcceptanceStats stats;
  auto next_k = [&] {
    const double pooled = stats.pooled_acceptance_rate(kPooledPriorDrafts);
    return draft_length_for_cost(stats.shrunk_acceptance_rate(pooled, kAcceptanceShrink), cost, k_max);
  };
  EXPECT_EQ(next_k(), draft_length_for_cost(AcceptanceStatsConfig{}.prior_rate, cost, k_max));
  for (int i = 0; i < 30; ++i) stats.record(next_k(), next_k());
  EXPECT_EQ(next_k(), k_max);
  int32_t previous = next_k();
  for (int steps = 0; next_k() > 0; ++steps) {
    stats.record(next_k(), 0);
    EXPECT_LE(next_k(), previous) << "k grew on a failure";
    previous = next_k();
    ASSERT_LT(steps, 2000) << "k never reached 0 on failures alone";
  }
  stats.record(1, 1);  // what a request that stopped drafting learns when it drafts again
  for (int i = 0; i < 200 && next_k() < k_max; ++i) stats.record(std::max(1, next_k()), std::max(1, next_k()));
  EXPECT_EQ(next_k(), k_max);
}

// Deterministic noise in [-amplitude, amplitude] for step i.
double noise(int i, double amplitude) { return amplitude * (static_cast<double>((i * 7919) % 101) / 50.0 - 1.0); }

// One request that drafts one token in a quarter of its steps: sizes 1 and 2,
// a size variance of 0.19. With step times as noisy as a busy machine's
// (+-3 ms on 16 ms), the slope is still well enough determined to be used.
TEST(StepCostModel, FitsSizesOneTokenApartOverManySteps) {
  StepCostModel m;
  for (int i = 0; i < 200; ++i) {
    const int64_t n = i % 4 == 0 ? 2 : 1;
    m.observe(n, 0.013 + 0.003 * static_cast<double>(n) + noise(i, 0.003));
  }
  const auto fit = m.fit();
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->per_token, 0.003, 0.0015);
}

// 64 requests of which one drafts now and then: sizes 64 and 65, where the
// same relative noise (+-10 ms on 100 ms) swamps a slope of 1 ms a token.
// No fit: a slope from it would decide every request's drafting at random.
TEST(StepCostModel, NoFitFromNoisyStepsOneTokenApart) {
  StepCostModel m;
  for (int i = 0; i < 400; ++i) {
    const int64_t n = i % 4 == 0 ? 65 : 64;
    m.observe(n, 0.036 + 0.001 * static_cast<double>(n) + noise(i, 0.010));
  }
  EXPECT_FALSE(m.fit().has_value());
}

// One plain step of n tokens then one verify with probe_draft_tokens(n)
// drafts in all is enough for a fit, for every batch size; two drafts fewer
// are not (two steps leave no residual to judge a smaller lever by).
TEST(StepCostModel, OneProbeAfterOnePlainStepGivesAFit) {
  for (int64_t n = 1; n <= 64; ++n) {
    const int64_t drafts = probe_draft_tokens(n);
    StepCostModel m;
    m.observe(n, 0.01 + 0.001 * static_cast<double>(n));
    m.observe(n + drafts, 0.01 + 0.001 * static_cast<double>(n + drafts));
    ASSERT_TRUE(m.fit().has_value()) << n;
    EXPECT_NEAR(m.fit()->per_token, 0.001, 1e-9) << n;
    StepCostModel fewer;
    fewer.observe(n, 0.01 + 0.001 * static_cast<double>(n));
    fewer.observe(n + 1, 0.01 + 0.001 * static_cast<double>(n + 1));
    EXPECT_FALSE(fewer.fit().has_value()) << n;
  }
}

// 64 requests after the probe (64 plain, then 128 with its drafts), then
// plain steps while requests finish one by one: 40 steps of 64, 30 of 63, 12
// of 62 and 40 of 61, each +-12 ms on 300 ms, with bursts of three steps 80
// ms slower now and then, as a busy machine gives them. The sizes' spread is
// a few tokens, about what one burst costs, so it says nothing about the
// slope: the probe's (3 ms a token) stays. (Taken as a fit whatever the noise
// because the sizes' variance passed 1, the slope fell below half its value
// in 4 of 5 such traces in a simulation, and to 0 in a run of 64 chat
// requests: verifying looked free, and a draft model caught up on 2,048
// tokens of context.)
TEST(StepCostModel, StepsAFewTokensApartAfterTheProbeKeepItsSlope) {
  StepCostModel m;
  auto step = [](int64_t n) { return 0.10 + 0.003 * static_cast<double>(n); };
  m.observe(64, step(64));
  m.observe(128, step(128));
  ASSERT_TRUE(m.fit().has_value());
  std::vector<int64_t> sizes;
  for (const auto& [n, count] : {std::pair{64, 40}, {63, 30}, {62, 12}, {61, 40}}) sizes.insert(sizes.end(), count, n);
  int burst = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (burst == 0 && (i * 37) % 23 == 0) burst = 3;
    const double slow = burst > 0 ? 0.08 : 0.0;
    burst = std::max(0, burst - 1);
    m.observe(sizes[i], step(sizes[i]) + noise(static_cast<int>(i), 0.012) + slow);
    ASSERT_TRUE(m.fit().has_value());
    EXPECT_NEAR(m.fit()->per_token, 0.003, 0.0015) << "step " << i;
  }
}

// A probe that comes late, after twenty plain steps of 16 (+-2 ms on 60 ms):
// the first fit needs no standard error, as the probe right after one plain
// step does not.
TEST(StepCostModel, ALateProbeStillGivesAFit) {
  StepCostModel m;
  for (int i = 0; i < 20; ++i) m.observe(16, 0.012 + 0.003 * 16 + noise(i, 0.002));
  EXPECT_FALSE(m.fit().has_value());
  m.observe(32, 0.012 + 0.003 * 32);
  ASSERT_TRUE(m.fit().has_value());
  EXPECT_NEAR(m.fit()->per_token, 0.003, 0.0005);
}

// A request's share of a step: the fitted step at this batch size over the batch.
TEST(StepCostModel, RequestShareOfAStep) {
  StepCostModel varied;
  for (int i = 0; i < 200; ++i) {
    const int64_t n = 1 + (i * 7) % 40;
    varied.observe(n, 0.006 + 0.0015 * static_cast<double>(n));
  }
  EXPECT_NEAR(request_share_seconds(*varied.fit(), 4), (0.006 + 0.006) / 4, 1e-9);
  EXPECT_NEAR(request_share_seconds(*varied.fit(), 1), 0.0075, 1e-9);
}

// What drafting saves a request: every remaining token's share of a step,
// less the cost of verifying (and drafting) per token gained, priced with
// kDraftingMargin as draft_length_for_cost prices it. At acceptance 0.5,
// k = 2, relative cost 0.25: E = 1.75 tokens for 1.5 units, 1.575 with the
// margin, a saving of 1 - 1.575 / 1.75 = 0.1 of each token's time. Nothing is
// saved where drafting does not pay, or with nothing left to generate.
TEST(StepCostModel, DraftingSavingsOverTheRestOfARequest) {
  ASSERT_DOUBLE_EQ(kDraftingMargin, 0.05);  // the figures below assume it
  EXPECT_NEAR(drafting_savings_seconds(0.5, 2, 0.25, 140, 0.01), 140 * 0.01 * 0.1, 1e-12);
  EXPECT_EQ(drafting_savings_seconds(0.1, 1, 0.25, 140, 0.01), 0.0);
  // Within the margin: 1.3 tokens for 1.25 units is 1.04 < 1.05.
  EXPECT_EQ(drafting_savings_seconds(0.3, 1, 0.25, 140, 0.01), 0.0);
  EXPECT_EQ(drafting_savings_seconds(0.9, 3, 0.1, 0, 0.01), 0.0);
  EXPECT_EQ(drafting_savings_seconds(0.9, 0, 0.1, 100, 0.01), 0.0);
  // Certain acceptance and free verifying: k + 1 tokens a step, all but
  // 1.05 / (k + 1) of each token's time saved.
  EXPECT_NEAR(drafting_savings_seconds(1.0, 3, 0.0, 100, 0.01), 100 * 0.01 * (1 - 1.05 / 4), 1e-12);
}

// With no estimate per draft, each further draft's chance that all so far
// are accepted is a^j: the continuation threshold then stops a run at the
// length draft_length_for_cost gives, wherever that drafts at all.
TEST(StepCostModel, TheContinuationThresholdAtTheRateAloneGivesTheRatesDraftLength) {
  int checked = 0;
  for (int ai = 1; ai < 100; ++ai) {
    for (int ci = 1; ci <= 100; ++ci) {
      for (int32_t k_max : {1, 3, 5, 8}) {
        const double a = ai / 100.0, c = ci / 100.0;
        const int32_t k = draft_length_for_cost(a, c, k_max);
        if (k == 0) continue;
        const double threshold = draft_continuation_threshold(a, c, k_max);
        int32_t drafts = 1;  // the first is drafted whenever k > 0
        double all_accepted = a;
        while (drafts < k_max && all_accepted >= threshold) {
          ++drafts;
          all_accepted *= a;
        }
        // Ties between two lengths' ratios can go either way.
        const double tie = std::abs(expected_tokens_per_verify(a, drafts) / (1 + drafts * c) -
                                    expected_tokens_per_verify(a, k) / (1 + k * c));
        if (tie > 1e-9) {
          EXPECT_EQ(drafts, k) << "a " << a << " c " << c << " k_max " << k_max;
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

// A confident run goes on where the rate alone would stop, an unsure draft
// ends it sooner: at a = 0.55 and c = 0.26 the rate drafts 1 (1.55 / 1.26 =
// 1.230 against 1.8525 / 1.52 = 1.219) and the threshold is c x 1.230 / a =
// 0.58, so a draft estimated at 0.9 is followed by another, one estimated at
// 0.5 is not.
TEST(StepCostModel, TheContinuationThresholdWeighsEachDraftsEstimate) {
  EXPECT_EQ(draft_length_for_cost(0.55, 0.26, 5), 1);
  const double threshold = draft_continuation_threshold(0.55, 0.26, 5);
  EXPECT_NEAR(threshold, 0.26 * (1.55 / 1.26) / 0.55, 1e-12);
  EXPECT_GT(0.9, threshold);
  EXPECT_GT(0.9 * 0.9 * 0.9, threshold);
  EXPECT_LT(0.5, threshold);
  EXPECT_DOUBLE_EQ(draft_continuation_threshold(0.0, 0.24, 5), 1.0);  // nothing accepted: never one more
}

}  // namespace
}  // namespace exactly
