#include "speculative/acceptance_stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace exactly {
namespace {

TEST(AcceptanceStats, CountsRatesAndMeanAcceptedLength) {
  AcceptanceStats stats;
  EXPECT_EQ(stats.acceptance_rate(), 0.0);
  EXPECT_EQ(stats.mean_accepted_length(), 0.0);
  stats.record(4, 2);
  stats.record(4, 4);
  stats.record(3, 0);
  stats.record(0, 0);  // nothing drafted: not a verify
  EXPECT_EQ(stats.num_verifies(), 3);
  EXPECT_EQ(stats.num_drafted(), 11);
  EXPECT_EQ(stats.num_accepted(), 6);
  EXPECT_DOUBLE_EQ(stats.acceptance_rate(), 6.0 / 11.0);
  EXPECT_DOUBLE_EQ(stats.mean_accepted_length(), 2.0);
}

// Expected tokens per verify against a direct enumeration: j drafts accepted
// then a rejection has probability a^j (1 - a) for j < k, all k accepted a^k;
// the verify emits j + 1 tokens.
TEST(AcceptanceStats, ExpectedTokensPerVerifyMatchesEnumeration) {
  for (double a : {0.0, 0.1, 0.5, 0.83, 0.99, 1.0}) {
    for (int32_t k = 0; k <= 10; ++k) {
      double expected = 0;
      for (int32_t j = 0; j < k; ++j) expected += std::pow(a, j) * (1 - a) * (j + 1);
      expected += std::pow(a, k) * (k + 1);
      EXPECT_NEAR(expected_tokens_per_verify(a, k), expected, 1e-12) << a << " " << k;
      if (a < 1) {
        EXPECT_NEAR(expected_tokens_per_verify(a, k), (1 - std::pow(a, k + 1)) / (1 - a), 1e-12);
      }
    }
  }
}

TEST(AcceptanceStats, RecentRateCountsOnlyExaminedDrafts) {
  AcceptanceStats stats;
  for (int i = 0; i < 50; ++i) stats.record(4, 2);  // 2 accepted, 1 rejected, 1 never tested
  EXPECT_NEAR(stats.recent_acceptance_rate(), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(stats.acceptance_rate(), 0.5, 1e-12);
}

// One lucky verify moves a request's own rate to 1; shrunk towards what all
// requests' drafts achieve it stays near that, and a long record outweighs
// the prior.
TEST(AcceptanceStats, ShrunkRateWeighsOneVerifyAgainstThePrior) {
  AcceptanceStats stats;
  EXPECT_DOUBLE_EQ(stats.shrunk_acceptance_rate(0.3, 2.0), 0.3);
  stats.record(1, 1);
  EXPECT_DOUBLE_EQ(stats.recent_acceptance_rate(), 1.0);
  EXPECT_NEAR(stats.shrunk_acceptance_rate(0.3, 2.0), (1.0 + 2.0 * 0.3) / (1.0 + 2.0), 1e-12);
  for (int i = 0; i < 50; ++i) stats.record(6, 6);  // six examined per verify, all accepted
  EXPECT_NEAR(stats.shrunk_acceptance_rate(0.3, 2.0), (6.0 + 0.6) / (6.0 + 2.0), 1e-4);  // the first verify has decayed to 0.8^50
  EXPECT_DOUBLE_EQ(stats.shrunk_acceptance_rate(0.3, 0.0), stats.recent_acceptance_rate());
}

TEST(AcceptanceStats, LifetimeRateCountsOnlyExaminedDrafts) {
  AcceptanceStats stats;
  EXPECT_DOUBLE_EQ(stats.lifetime_acceptance_rate(), AcceptanceStatsConfig{}.prior_rate);
  stats.record(4, 2);  // 3 examined
  stats.record(2, 2);  // 2 examined
  stats.record(3, 0);  // 1 examined
  EXPECT_NEAR(stats.lifetime_acceptance_rate(), 4.0 / 6.0, 1e-12);
  for (int i = 0; i < 100; ++i) stats.record(1, 0);
  EXPECT_NEAR(stats.lifetime_acceptance_rate(), 4.0 / 106.0, 1e-12);  // not a moving average
}

TEST(AcceptanceStats, OneRejectedProbeDoesNotDecideThePooledRate) {
  // The pooled rate is every request's prior: after a probe whose two drafts
  // were both rejected it must still allow drafting (the plain lifetime rate
  // is 0 there), and with evidence it must follow the lifetime rate.
  AcceptanceStats stats;
  const double prior = AcceptanceStatsConfig{}.prior_rate;
  EXPECT_DOUBLE_EQ(stats.pooled_acceptance_rate(8.0), prior);
  stats.record(2, 0);  // 1 examined
  EXPECT_DOUBLE_EQ(stats.lifetime_acceptance_rate(), 0.0);
  EXPECT_NEAR(stats.pooled_acceptance_rate(8.0), 8.0 * prior / 9.0, 1e-12);
  for (int i = 0; i < 1000; ++i) stats.record(3, 2);  // 3 examined, 2 accepted
  EXPECT_NEAR(stats.pooled_acceptance_rate(8.0), (2000.0 + 8.0 * prior) / (3001.0 + 8.0), 1e-12);
  EXPECT_NEAR(stats.pooled_acceptance_rate(8.0), stats.lifetime_acceptance_rate(), 2e-3);
}

// Idle steps fade the pooled evidence: a bad stretch cannot hold the pooled
// rate, and with it every request's, below what pays for ever. The lifetime
// rate is the record and does not fade.
TEST(AcceptanceStats, FadingThePooledEvidenceReturnsItToThePrior) {
  AcceptanceStats stats;
  const double prior = AcceptanceStatsConfig{}.prior_rate;
  for (int i = 0; i < 200; ++i) stats.record(1, 0);
  const double low = stats.pooled_acceptance_rate(8.0);
  EXPECT_NEAR(low, 8.0 * prior / 208.0, 1e-12);
  stats.fade_pooled(0.5);
  EXPECT_NEAR(stats.pooled_acceptance_rate(8.0), 8.0 * prior / 108.0, 1e-12);
  for (int i = 0; i < 60; ++i) stats.fade_pooled(0.5);
  EXPECT_NEAR(stats.pooled_acceptance_rate(8.0), prior, 1e-9);
  EXPECT_NEAR(stats.pooled_rate_to_decide_by(8.0), prior, 1e-9);
  EXPECT_DOUBLE_EQ(stats.lifetime_acceptance_rate(), 0.0);
  stats.record(2, 2);  // new evidence counts in full
  EXPECT_NEAR(stats.pooled_acceptance_rate(8.0), (2.0 + 8.0 * prior) / (2.0 + 8.0), 1e-6);
}

// A run of rejections pushes a request's estimate below the prior; steps
// without drafts fade that evidence, so the estimate returns to the prior
// (and the request drafts again to test it), without ever reaching 0/0.
TEST(AcceptanceStats, FadingReturnsTheShrunkRateToThePrior) {
  AcceptanceStats stats;
  for (int i = 0; i < 10; ++i) stats.record(2, 0);
  const double low = stats.shrunk_acceptance_rate(0.6, 2.0);
  EXPECT_NEAR(low, (0.0 + 2.0 * 0.6) / (1.0 + 2.0), 1e-9);  // one examined draft per verify, none accepted
  double previous = low;
  for (int i = 0; i < 5; ++i) {
    stats.fade();
    const double now = stats.shrunk_acceptance_rate(0.6, 2.0);
    EXPECT_GT(now, previous);
    previous = now;
  }
  EXPECT_DOUBLE_EQ(stats.recent_acceptance_rate(), 0.0);  // fading weighs, it invents no acceptances
  for (int i = 0; i < 100000; ++i) stats.fade();
  EXPECT_NEAR(stats.shrunk_acceptance_rate(0.6, 2.0), 0.6, 1e-6);
  EXPECT_TRUE(std::isfinite(stats.recent_acceptance_rate()));
  stats.record(1, 1);  // fresh evidence counts at once
  EXPECT_GT(stats.shrunk_acceptance_rate(0.6, 2.0), 0.6);
}

// The rate drafting is decided by stays at the prior while a few rejections
// cannot rule it out (a request whose first two drafts were rejected drafts
// again), and follows the pooled rate once evidence has shrunk its error.
TEST(AcceptanceStats, FewRejectionsDoNotPushTheRateToDecideByBelowThePrior) {
  AcceptanceStats stats;
  const double prior = AcceptanceStatsConfig{}.prior_rate;
  EXPECT_DOUBLE_EQ(stats.pooled_rate_to_decide_by(8.0), prior);
  stats.record(1, 0);
  stats.record(1, 0);  // pooled 4/10 = 0.40, standard error sqrt(0.24/10) = 0.155
  EXPECT_NEAR(stats.pooled_acceptance_rate(8.0), 0.4, 1e-12);
  EXPECT_DOUBLE_EQ(stats.pooled_rate_to_decide_by(8.0), prior);
  for (int i = 0; i < 38; ++i) stats.record(1, 0);  // pooled 4/48 = 0.083, error 0.04
  EXPECT_NEAR(stats.pooled_rate_to_decide_by(8.0), 4.0 / 48.0 + std::sqrt((4.0 / 48.0) * (44.0 / 48.0) / 48.0), 1e-12);
  EXPECT_LT(stats.pooled_rate_to_decide_by(8.0), 0.15);
  for (int i = 0; i < 200; ++i) stats.record(2, 2);  // well above the prior: the pooled rate itself
  EXPECT_DOUBLE_EQ(stats.pooled_rate_to_decide_by(8.0), stats.pooled_acceptance_rate(8.0));
  EXPECT_GT(stats.pooled_rate_to_decide_by(8.0), 0.8);
}

}  // namespace
}  // namespace exactly
