// The real RejectionSampler, run a million times with drafts drawn from q,
// emits tokens whose frequencies pass a chi-square goodness-of-fit test against
// the target, while deliberately wrong rules fail the same test.
//
// Each test rejects at a false-alarm rate of 1e-4: the critical value is the
// chi-square upper 1e-4 quantile for the test's degrees of freedom (9 for the
// first token over 10 tokens: 33.72; 99 for the joint law of two tokens:
// 160.06), computed by chi_square_upper_quantile, which chi_square_test.cc
// checks against printed tables. Seeds are fixed, so the outcome is
// deterministic; the rate says how unlikely a correct sampler is to fail with a
// new seed.
#include <gtest/gtest.h>

#include <vector>

#include "chi_square.h"
#include "sample/rng.h"
#include "speculative/rejection_sampler.h"
#include "wrong_rules.h"

namespace exactly {
namespace {

using Dist = std::vector<double>;  // [vocab]

constexpr size_t kVocab = 10;
constexpr int kDraws = 1'000'000;
constexpr double kFalseAlarmRate = 1e-4;

Dist normalised(Dist d) {
  double s = 0;
  for (double x : d) s += x;
  for (double& x : d) x /= s;
  return d;
}

// The target and draft laws: p1 and q1 for the first position, p2[t] and q2[t]
// for the second given the first token t. They overlap only partly (q puts
// mass where p has none and vice versa), so every branch of the rule runs.
struct Model {
  Dist p1 = normalised({0.20, 0.15, 0.12, 0.10, 0.10, 0.09, 0.08, 0.07, 0.05, 0.04});
  Dist q1 = normalised({0.05, 0.25, 0.02, 0.20, 0.10, 0.00, 0.15, 0.03, 0.12, 0.08});
  std::vector<Dist> p2, q2;  // [kVocab][kVocab]
  Dist p3 = normalised({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});  // bonus after two accepted drafts

  Model() {
    Rng rng(31337);
    for (size_t t = 0; t < kVocab; ++t) {
      Dist p(kVocab), q(kVocab);
      for (size_t i = 0; i < kVocab; ++i) {
        p[i] = 0.2 + rng.uniform();
        q[i] = (i + t) % 4 == 0 ? 0.0 : rng.uniform();
      }
      p2.push_back(normalised(p));
      q2.push_back(normalised(q));
    }
  }
};

DistributionView view(const Dist& d) { return DistributionView::dense(std::span<const double>(d)); }

// The drafter's own draw, written independently of the code under test.
int32_t draw_draft(const Dist& q, Rng& rng) {
  double u = rng.uniform();
  for (size_t i = 0; i < q.size(); ++i) {
    if (u < q[i]) return static_cast<int32_t>(i);
    u -= q[i];
  }
  for (size_t i = q.size(); i-- > 0;)
    if (q[i] > 0) return static_cast<int32_t>(i);
  return 0;
}

// First emitted token of a 2-draft verify, counted over kDraws calls.
std::vector<int64_t> first_token_counts(const AcceptanceRule& rule) {
  const Model m;
  RejectionSampler sampler(rule);
  Rng target_rng(2024), draft_rng(4048);
  std::vector<int64_t> counts(kVocab, 0);
  for (int n = 0; n < kDraws; ++n) {
    const int32_t x1 = draw_draft(m.q1, draft_rng);
    const int32_t x2 = draw_draft(m.q2[static_cast<size_t>(x1)], draft_rng);
    const int32_t drafts[] = {x1, x2};
    const DistributionView q[] = {view(m.q1), view(m.q2[static_cast<size_t>(x1)])};
    const DistributionView p[] = {view(m.p1), view(m.p2[static_cast<size_t>(x1)]), view(m.p3)};
    counts[static_cast<size_t>(sampler.verify(drafts, q, p, target_rng).tokens[0])]++;
  }
  return counts;
}

double critical_value(int dof) { return testing::chi_square_upper_quantile(kFalseAlarmRate, dof); }

TEST(RejectionChiSquare, CriticalValuesAreTheOnesDocumented) {
  EXPECT_NEAR(critical_value(9), 33.72, 0.01);
  EXPECT_NEAR(critical_value(99), 160.06, 0.01);
}

TEST(RejectionChiSquare, FirstEmittedTokenFollowsTheTarget) {
  int dof = 0;
  const double stat = testing::chi_square_statistic(first_token_counts(kModifiedRejection), Model().p1, &dof);
  EXPECT_EQ(dof, 9);
  EXPECT_LT(stat, critical_value(dof));
}

TEST(RejectionChiSquare, AcceptingWheneverTheDraftDominatesFails) {
  int dof = 0;
  const double stat =
      testing::chi_square_statistic(first_token_counts(testing::kWrongAcceptWhenDraftDominates), Model().p1, &dof);
  EXPECT_GT(stat, critical_value(9));
}

TEST(RejectionChiSquare, ResamplingFromTheTargetAtRejectionFails) {
  int dof = 0;
  const double stat =
      testing::chi_square_statistic(first_token_counts(testing::kWrongResampleFromTarget), Model().p1, &dof);
  EXPECT_GT(stat, critical_value(9));
}

// One draft per call (so an accepted draft is followed by the bonus draw from
// p2[x1]); when the first call emits a single token, a second call drafts from
// q2[t1] and verifies against p2[t1]. The joint law of the first two tokens
// must be p1(t1) * p2[t1](t2).
TEST(RejectionChiSquare, FirstTwoEmittedTokensFollowTheTargetsJointLaw) {
  const Model m;
  RejectionSampler sampler;
  Rng target_rng(77), draft_rng(78);
  std::vector<int64_t> counts(kVocab * kVocab, 0);  // [t1 * kVocab + t2]
  for (int n = 0; n < kDraws; ++n) {
    const int32_t x1 = draw_draft(m.q1, draft_rng);
    const DistributionView q1[] = {view(m.q1)};
    const DistributionView p[] = {view(m.p1), view(m.p2[static_cast<size_t>(x1)])};
    const VerifyOutcome first = sampler.verify(std::span<const int32_t>(&x1, 1), q1, p, target_rng);
    const size_t t1 = static_cast<size_t>(first.tokens[0]);
    int32_t t2 = 0;
    if (first.tokens.size() == 2) {
      t2 = first.tokens[1];
    } else {
      const int32_t y = draw_draft(m.q2[t1], draft_rng);
      const DistributionView q_next[] = {view(m.q2[t1])};
      const DistributionView p_next[] = {view(m.p2[t1]), view(m.p3)};
      t2 = sampler.verify(std::span<const int32_t>(&y, 1), q_next, p_next, target_rng).tokens[0];
    }
    counts[t1 * kVocab + static_cast<size_t>(t2)]++;
  }
  Dist expected(kVocab * kVocab);
  for (size_t t1 = 0; t1 < kVocab; ++t1)
    for (size_t t2 = 0; t2 < kVocab; ++t2) expected[t1 * kVocab + t2] = m.p1[t1] * m.p2[t1][t2];
  int dof = 0;
  const double stat = testing::chi_square_statistic(counts, expected, &dof);
  EXPECT_EQ(dof, 99);
  EXPECT_LT(stat, critical_value(dof));
}

}  // namespace
}  // namespace exactly
