// The output law of modified rejection sampling, computed exactly in float64 by
// enumerating every draft and every branch of the acceptance rule — through the
// same decision functions the RejectionSampler calls — equals the target's law.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sample/rng.h"
#include "speculative/acceptance_rule.h"
#include "wrong_rules.h"

namespace exactly {
namespace {

using Dist = std::vector<double>;  // [vocab]

Dist normalised(Dist d) {
  double s = 0;
  for (double x : d) s += x;
  for (double& x : d) x /= s;
  return d;
}

// A random distribution over `vocab` tokens with roughly `zero_fraction` of
// them given no mass (never all).
Dist random_dist(size_t vocab, Rng& rng, double zero_fraction) {
  Dist d(vocab);
  for (double& x : d) x = rng.uniform() < zero_fraction ? 0.0 : 0.05 + rng.uniform();
  d[static_cast<size_t>(rng.next() % vocab)] += 0.5;
  return normalised(d);
}

Dist one_hot(size_t vocab, size_t id) {
  Dist d(vocab, 0.0);
  d[id] = 1.0;
  return d;
}

// q and p on disjoint supports: q on the even ids, p on the odd ones.
std::pair<Dist, Dist> disjoint_pair(size_t vocab, Rng& rng) {
  Dist p(vocab, 0.0), q(vocab, 0.0);
  for (size_t i = 0; i < vocab; ++i) (i % 2 ? p : q)[i] = 0.1 + rng.uniform();
  return {normalised(p), normalised(q)};
}

DistributionView view(const Dist& d) { return DistributionView::dense(std::span<const double>(d)); }

// Law of the first emitted token when the draft x ~ q is verified against p.
Dist first_token_law(const AcceptanceRule& rule, DistributionView p, DistributionView q, size_t vocab) {
  Dist law(vocab, 0.0);
  std::vector<WeightedToken> residual;
  rule.residual(p, q, residual);
  q.for_each([&](int32_t x, double q_x) {
    if (q_x <= 0) return;
    const double accept = rule.accept_probability(p.prob(x), q_x);
    law[static_cast<size_t>(x)] += q_x * accept;
    for (const WeightedToken& r : residual) law[static_cast<size_t>(r.id)] += q_x * (1 - accept) * r.p;
  });
  return law;
}

double max_abs_diff(const Dist& a, const Dist& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Every family of (p, q) the rule must handle, over vocabularies of 2..8.
struct Case {
  Dist p, q;
  const char* family;
};
std::vector<Case> cases() {
  std::vector<Case> out;
  Rng rng(20230518);
  for (size_t vocab = 2; vocab <= 8; ++vocab) {
    for (int trial = 0; trial < 20; ++trial) {
      out.push_back({random_dist(vocab, rng, 0.0), random_dist(vocab, rng, 0.0), "full supports"});
      out.push_back({random_dist(vocab, rng, 0.4), random_dist(vocab, rng, 0.4), "partial supports"});
      auto [p, q] = disjoint_pair(vocab, rng);
      out.push_back({p, q, "disjoint supports"});
      Dist same = random_dist(vocab, rng, 0.3);
      out.push_back({same, same, "q == p"});
      out.push_back({random_dist(vocab, rng, 0.3), one_hot(vocab, rng.next() % vocab), "q one-hot"});
      out.push_back({one_hot(vocab, rng.next() % vocab), random_dist(vocab, rng, 0.3), "p one-hot"});
      const size_t id = rng.next() % vocab;
      out.push_back({one_hot(vocab, id), one_hot(vocab, id), "p == q one-hot"});
      out.push_back({one_hot(vocab, id), one_hot(vocab, (id + 1) % vocab), "p, q different one-hots"});
    }
  }
  return out;
}

TEST(ExactLaw, FirstEmittedTokenFollowsTheTarget) {
  for (const Case& c : cases()) {
    const Dist law = first_token_law(kModifiedRejection, view(c.p), view(c.q), c.p.size());
    EXPECT_LE(max_abs_diff(law, c.p), 1e-12) << c.family << ", vocab " << c.p.size();
  }
}

TEST(ExactLaw, SparseAndOneHotViewsGiveTheSameLaw) {
  Rng rng(7);
  for (size_t vocab = 2; vocab <= 8; ++vocab) {
    const Dist p = random_dist(vocab, rng, 0.3);
    const Dist q = random_dist(vocab, rng, 0.3);
    std::vector<WeightedToken> p_sparse, q_sparse;  // listed in reverse id order on purpose
    for (size_t i = vocab; i-- > 0;) {
      if (p[i] > 0) p_sparse.push_back({static_cast<int32_t>(i), p[i]});
      if (q[i] > 0) q_sparse.push_back({static_cast<int32_t>(i), q[i]});
    }
    const Dist law = first_token_law(kModifiedRejection, DistributionView::sparse(std::span<const WeightedToken>(p_sparse)),
                                     DistributionView::sparse(std::span<const WeightedToken>(q_sparse)), vocab);
    EXPECT_LE(max_abs_diff(law, p), 1e-12) << vocab;
    for (size_t x = 0; x < vocab; ++x) {
      const Dist law_one_hot =
          first_token_law(kModifiedRejection, view(p), DistributionView::one_hot(static_cast<int32_t>(x)), vocab);
      EXPECT_LE(max_abs_diff(law_one_hot, p), 1e-12) << vocab << " one-hot at " << x;
    }
  }
}

// Two speculative positions. The target's second distribution p2[t1] and the
// draft's q2[x1] depend on the first token. Drafts x1 ~ q1, x2 ~ q2[x1]; if x1
// is accepted the second position is verified in the same call (against
// p2[x1]); if x1 is rejected the call ends with t1 drawn from the residual and
// the next call drafts afresh from q2[t1] against p2[t1].
// The joint law of (t1, t2) must be p1(t1) * p2[t1](t2).
TEST(ExactLaw, FirstTwoEmittedTokensFollowTheTargetsJointLaw) {
  Rng rng(99);
  for (size_t vocab = 2; vocab <= 8; ++vocab) {
    for (int trial = 0; trial < 30; ++trial) {
      const double zeros = trial % 3 == 0 ? 0.0 : 0.35;
      const Dist p1 = trial % 5 == 4 ? one_hot(vocab, rng.next() % vocab) : random_dist(vocab, rng, zeros);
      const Dist q1 = trial % 7 == 6 ? one_hot(vocab, rng.next() % vocab) : random_dist(vocab, rng, zeros);
      std::vector<Dist> p2, q2;  // [vocab][vocab]: conditioned on the first token
      for (size_t t = 0; t < vocab; ++t) {
        p2.push_back(random_dist(vocab, rng, zeros));
        q2.push_back(trial % 4 == 3 ? one_hot(vocab, rng.next() % vocab) : random_dist(vocab, rng, zeros));
      }
      std::vector<Dist> joint(vocab, Dist(vocab, 0.0));  // [t1][t2]
      std::vector<WeightedToken> residual1;
      kModifiedRejection.residual(view(p1), view(q1), residual1);
      for (size_t x1 = 0; x1 < vocab; ++x1) {
        if (q1[x1] <= 0) continue;
        const double a1 = kModifiedRejection.accept_probability(p1[x1], q1[x1]);
        // x1 accepted: the second position is verified in the same call.
        const Dist second = first_token_law(kModifiedRejection, view(p2[x1]), view(q2[x1]), vocab);
        for (size_t t2 = 0; t2 < vocab; ++t2) joint[x1][t2] += q1[x1] * a1 * second[t2];
        // x1 rejected: t1 from the residual, then a fresh call for t2.
        for (const WeightedToken& r : residual1) {
          const size_t t1 = static_cast<size_t>(r.id);
          const Dist next = first_token_law(kModifiedRejection, view(p2[t1]), view(q2[t1]), vocab);
          for (size_t t2 = 0; t2 < vocab; ++t2) joint[t1][t2] += q1[x1] * (1 - a1) * r.p * next[t2];
        }
      }
      for (size_t t1 = 0; t1 < vocab; ++t1)
        for (size_t t2 = 0; t2 < vocab; ++t2)
          EXPECT_NEAR(joint[t1][t2], p1[t1] * p2[t1][t2], 1e-12) << "vocab " << vocab << " trial " << trial;
    }
  }
}

// The enumeration is sharp enough to reject the classic mistakes.
TEST(ExactLaw, WrongRulesAreDetected) {
  const Dist p = {0.5, 0.3, 0.2};
  const Dist q = {0.2, 0.3, 0.5};
  EXPECT_LE(max_abs_diff(first_token_law(kModifiedRejection, view(p), view(q), 3), p), 1e-12);
  EXPECT_GT(max_abs_diff(first_token_law(testing::kWrongAcceptWhenDraftDominates, view(p), view(q), 3), p), 0.05);
  EXPECT_GT(max_abs_diff(first_token_law(testing::kWrongResampleFromTarget, view(p), view(q), 3), p), 0.05);
}

TEST(ExactLaw, ResidualOfAOneHotDraftIsTheTargetWithoutIt) {
  const Dist p = {0.1, 0.4, 0.2, 0.3};
  std::vector<WeightedToken> residual;
  modified_rejection_residual(view(p), DistributionView::one_hot(1), residual);
  ASSERT_EQ(residual.size(), 3u);
  EXPECT_EQ(residual[0].id, 0);
  EXPECT_NEAR(residual[0].p, 0.1 / 0.6, 1e-15);
  EXPECT_EQ(residual[1].id, 2);
  EXPECT_NEAR(residual[1].p, 0.2 / 0.6, 1e-15);
  EXPECT_EQ(residual[2].id, 3);
  EXPECT_NEAR(residual[2].p, 0.3 / 0.6, 1e-15);
  EXPECT_DOUBLE_EQ(modified_rejection_accept_probability(0.4, 1.0), 0.4);
}

TEST(ExactLaw, EdgeCasesOfTheDecisionFunctions) {
  EXPECT_EQ(modified_rejection_accept_probability(0.3, 0.0), 0.0);  // a draft q could not have produced
  EXPECT_EQ(modified_rejection_accept_probability(0.0, 0.3), 0.0);
  EXPECT_EQ(modified_rejection_accept_probability(0.5, 0.3), 1.0);
  EXPECT_DOUBLE_EQ(modified_rejection_accept_probability(0.3, 0.6), 0.5);
  // p == q: no excess anywhere, so the residual falls back to p.
  const Dist p = {0.25, 0.0, 0.75};
  std::vector<WeightedToken> residual;
  modified_rejection_residual(view(p), view(p), residual);
  ASSERT_EQ(residual.size(), 2u);
  EXPECT_EQ(residual[0].id, 0);
  EXPECT_DOUBLE_EQ(residual[0].p, 0.25);
  EXPECT_EQ(residual[1].id, 2);
  EXPECT_DOUBLE_EQ(residual[1].p, 0.75);
}

// A large sparse q is looked up through its sorted index; the residual must
// equal the dense computation.
TEST(ExactLaw, ResidualWithALargeSparseDraftMatchesTheDenseOne) {
  Rng rng(5);
  const size_t vocab = 300;
  const Dist p = random_dist(vocab, rng, 0.5), q = random_dist(vocab, rng, 0.5);
  std::vector<TokenProb> q_sparse;  // [num_nonzero] in a scrambled order
  for (size_t i = 0; i < vocab; ++i) {
    const size_t id = (i * 7) % vocab;
    if (q[id] > 0) q_sparse.push_back({static_cast<int32_t>(id), 0.0f, q[id]});
  }
  ASSERT_GT(q_sparse.size(), 64u);
  std::vector<WeightedToken> from_dense, from_sparse;
  modified_rejection_residual(view(p), view(q), from_dense);
  modified_rejection_residual(view(p), DistributionView::sparse(std::span<const TokenProb>(q_sparse)), from_sparse);
  ASSERT_EQ(from_dense.size(), from_sparse.size());
  for (size_t i = 0; i < from_dense.size(); ++i) {
    EXPECT_EQ(from_dense[i].id, from_sparse[i].id);
    EXPECT_EQ(from_dense[i].p, from_sparse[i].p);
  }
}

}  // namespace
}  // namespace exactly
