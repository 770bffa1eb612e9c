#include "speculative/rejection_sampler.h"

#include <gtest/gtest.h>

#include <vector>

#include "sample/sampler.h"

namespace exactly {
namespace {

using Dist = std::vector<double>;  // [vocab]

DistributionView view(const Dist& d) { return DistributionView::dense(std::span<const double>(d)); }

TEST(RejectionSamplerGreedy, KeepsDraftsWhileTheyMatchTheArgmax) {
  const std::vector<int32_t> drafts = {4, 7, 1};
  {
    const VerifyOutcome o = RejectionSampler::verify_greedy(drafts, std::vector<int32_t>{4, 7, 1, 9});
    EXPECT_EQ(o.tokens, (std::vector<int32_t>{4, 7, 1, 9}));
    EXPECT_EQ(o.num_accepted, 3);
    EXPECT_EQ(o.num_draws, 0);
  }
  {
    const VerifyOutcome o = RejectionSampler::verify_greedy(drafts, std::vector<int32_t>{4, 2, 1, 9});
    EXPECT_EQ(o.tokens, (std::vector<int32_t>{4, 2}));
    EXPECT_EQ(o.num_accepted, 1);
  }
  {
    const VerifyOutcome o = RejectionSampler::verify_greedy(drafts, std::vector<int32_t>{5, 7, 1, 9});
    EXPECT_EQ(o.tokens, (std::vector<int32_t>{5}));
    EXPECT_EQ(o.num_accepted, 0);
  }
  const VerifyOutcome none = RejectionSampler::verify_greedy({}, std::vector<int32_t>{3});
  EXPECT_EQ(none.tokens, (std::vector<int32_t>{3}));
}

// A greedy Sampler's distribution is one-hot at the argmax; verifying against
// it through the sampled path must give the greedy answer whatever the draws.
TEST(RejectionSamplerGreedy, SampledPathWithOneHotTargetsIsGreedy) {
  SamplingParams sp;
  sp.temperature = 0;
  const Sampler greedy(sp);
  const std::vector<std::vector<float>> logits = {{0.1f, 2.0f, -1.0f}, {3.0f, 0.0f, 0.5f}, {0.0f, 0.2f, 0.9f}};
  std::vector<std::vector<TokenProb>> dists;  // [k + 1][1]
  std::vector<int32_t> argmaxes;              // [k + 1]
  for (const auto& l : logits) {
    dists.push_back(greedy.distribution(l, {}));
    argmaxes.push_back(argmax(l));
  }
  std::vector<DistributionView> targets;
  for (const auto& d : dists) targets.push_back(DistributionView::sparse(std::span<const TokenProb>(d)));
  RejectionSampler sampler;
  for (const std::vector<int32_t>& drafts : {std::vector<int32_t>{1, 0}, {1, 2}, {0, 0}, {2, 2}}) {
    const VerifyOutcome expected = RejectionSampler::verify_greedy(drafts, argmaxes);
    for (uint64_t seed = 0; seed < 20; ++seed) {
      Rng rng(seed);
      EXPECT_EQ(sampler.verify_deterministic_drafts(drafts, targets, rng).tokens, expected.tokens);
    }
  }
}

// Three positions over 6 tokens, with overlapping but different p and q.
struct ThreePositions {
  Dist q1 = {0.3, 0.3, 0.1, 0.1, 0.1, 0.1}, q2 = {0.1, 0.1, 0.4, 0.1, 0.2, 0.1};
  Dist p1 = {0.2, 0.4, 0.0, 0.2, 0.1, 0.1}, p2 = {0.3, 0.1, 0.2, 0.1, 0.1, 0.2}, p3 = {0.1, 0.1, 0.1, 0.1, 0.1, 0.5};
  std::vector<DistributionView> q() const { return {view(q1), view(q2)}; }
  std::vector<DistributionView> p() const { return {view(p1), view(p2), view(p3)}; }
};

TEST(RejectionSampler, SameSeedSameOutcomeAndTheDocumentedNumberOfDraws) {
  const ThreePositions m;
  RejectionSampler sampler;
  int outcomes_by_length[4] = {0, 0, 0, 0};
  for (uint64_t seed = 0; seed < 300; ++seed) {
    const std::vector<int32_t> drafts = {static_cast<int32_t>(seed % 6), static_cast<int32_t>((seed / 6) % 6)};
    Rng a(seed), b(seed);
    const VerifyOutcome first = sampler.verify(drafts, m.q(), m.p(), a);
    const VerifyOutcome again = sampler.verify(drafts, m.q(), m.p(), b);
    EXPECT_EQ(first.tokens, again.tokens);
    const bool all_accepted = first.num_accepted == static_cast<int32_t>(drafts.size());
    EXPECT_EQ(first.num_draws, all_accepted ? first.num_accepted + 1 : first.num_accepted + 2);
    EXPECT_EQ(first.num_draws, RejectionSampler::draws_used(drafts.size(), static_cast<size_t>(first.num_accepted)));
    EXPECT_EQ(first.num_accepted + 1, static_cast<int32_t>(first.tokens.size()));
    for (int32_t i = 0; i < first.num_accepted; ++i) EXPECT_EQ(first.tokens[static_cast<size_t>(i)], drafts[static_cast<size_t>(i)]);
    // The request's generator advanced by exactly num_draws.
    Rng reference(seed);
    for (int32_t i = 0; i < first.num_draws; ++i) reference.next();
    EXPECT_EQ(reference.next(), a.next());
    outcomes_by_length[first.tokens.size()]++;
  }
  // The seeds reach every outcome length, so the draw count is checked on each.
  EXPECT_GT(outcomes_by_length[1], 0);
  EXPECT_GT(outcomes_by_length[2], 0);
  EXPECT_GT(outcomes_by_length[3], 0);
}

TEST(RejectionSampler, DenseFloatDenseDoubleAndSparseInputsAgree) {
  const ThreePositions m;
  auto to_float = [](const Dist& d) { return std::vector<float>(d.begin(), d.end()); };
  auto to_sparse = [](const Dist& d) {  // id order, so the draw walks the same order as the dense view
    std::vector<TokenProb> s;
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i] > 0) s.push_back({static_cast<int32_t>(i), 0.0f, d[i]});
    return s;
  };
  // Probabilities exact in float, so the three forms carry the same numbers.
  const Dist q1 = {0.25, 0.25, 0.125, 0.125, 0.125, 0.125}, p1 = {0.5, 0.0, 0.25, 0.125, 0.0625, 0.0625};
  const Dist p2 = {0.0625, 0.0625, 0.125, 0.25, 0.25, 0.25};
  const std::vector<float> q1f = to_float(q1), p1f = to_float(p1), p2f = to_float(p2);
  const std::vector<TokenProb> q1s = to_sparse(q1), p1s = to_sparse(p1), p2s = to_sparse(p2);
  RejectionSampler sampler;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::vector<int32_t> drafts = {static_cast<int32_t>(seed % 6)};
    Rng r1(seed), r2(seed), r3(seed);
    const auto d = sampler.verify(drafts, std::vector{view(q1)}, std::vector{view(p1), view(p2)}, r1);
    const auto f = sampler.verify(drafts, std::vector{DistributionView::dense(std::span<const float>(q1f))},
                                  std::vector{DistributionView::dense(std::span<const float>(p1f)),
                                              DistributionView::dense(std::span<const float>(p2f))},
                                  r2);
    const auto s = sampler.verify(drafts, std::vector{DistributionView::sparse(std::span<const TokenProb>(q1s))},
                                  std::vector{DistributionView::sparse(std::span<const TokenProb>(p1s)),
                                              DistributionView::sparse(std::span<const TokenProb>(p2s))},
                                  r3);
    EXPECT_EQ(d.tokens, f.tokens) << seed;
    EXPECT_EQ(d.tokens, s.tokens) << seed;
  }
}

TEST(RejectionSampler, DeterministicDraftsAreOneHotDrafts) {
  const ThreePositions m;
  RejectionSampler sampler;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const std::vector<int32_t> drafts = {static_cast<int32_t>(seed % 6), static_cast<int32_t>((seed / 6) % 6)};
    Rng a(seed), b(seed);
    const std::vector<DistributionView> one_hot = {DistributionView::one_hot(drafts[0]),
                                                   DistributionView::one_hot(drafts[1])};
    EXPECT_EQ(sampler.verify_deterministic_drafts(drafts, m.p(), a).tokens,
              sampler.verify(drafts, one_hot, m.p(), b).tokens);
  }
}

TEST(RejectionSampler, EdgeCases) {
  RejectionSampler sampler;
  const Dist p = {0.0, 0.5, 0.5, 0.0}, q_disjoint = {0.5, 0.0, 0.0, 0.5};
  const Dist p_one_hot = {0.0, 0.0, 0.0, 1.0}, q = {0.25, 0.25, 0.25, 0.25};
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Rng rng(seed);
    // Disjoint supports: never accepted, and the replacement comes from p.
    const std::vector<int32_t> from_q = {seed % 2 ? 0 : 3};
    const VerifyOutcome disjoint = sampler.verify(from_q, std::vector{view(q_disjoint)}, std::vector{view(p), view(p)}, rng);
    EXPECT_EQ(disjoint.num_accepted, 0);
    EXPECT_TRUE(disjoint.tokens[0] == 1 || disjoint.tokens[0] == 2);
    // A draft q gives no mass to is never accepted, even if p likes it.
    const std::vector<int32_t> impossible = {1};
    EXPECT_EQ(sampler.verify(impossible, std::vector{view(q_disjoint)}, std::vector{view(p), view(p)}, rng).num_accepted, 0);
    // One-hot target: the first token is its token, whatever was drafted.
    const std::vector<int32_t> any = {static_cast<int32_t>(seed % 4)};
    EXPECT_EQ(sampler.verify(any, std::vector{view(q)}, std::vector{view(p_one_hot), view(q)}, rng).tokens[0], 3);
    // No drafts: one plain draw from p_1.
    const VerifyOutcome plain = sampler.verify({}, {}, std::vector{view(p)}, rng);
    EXPECT_EQ(plain.tokens.size(), 1u);
    EXPECT_EQ(plain.num_draws, 1);
    // q == p: every draft is accepted.
    const std::vector<int32_t> drafts = {1, 2};
    EXPECT_EQ(sampler.verify(drafts, std::vector{view(p), view(p)}, std::vector{view(p), view(p), view(p)}, rng).num_accepted, 2);
  }
}

// Positions after the first rejection are never asked for, so the engine can
// process logits lazily.
TEST(RejectionSampler, LazyTargetsAreOnlyComputedWhereNeeded) {
  const Dist p = {1.0, 0.0}, q = {0.0, 1.0};
  RejectionSampler sampler;
  Rng rng(1);
  std::vector<size_t> asked;
  const std::vector<int32_t> drafts = {1, 1, 1};
  const std::vector<DistributionView> qs = {view(q), view(q), view(q)};
  const VerifyOutcome o = sampler.verify(drafts, qs, [&](size_t i) { asked.push_back(i); return view(p); }, rng);
  EXPECT_EQ(o.tokens, (std::vector<int32_t>{0}));
  EXPECT_EQ(asked, (std::vector<size_t>{0}));
}

}  // namespace
}  // namespace exactly
