#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

namespace exactly {
namespace {

std::vector<float> random_logits(int n, uint64_t seed, float spread = 4.0f) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>((rng.uniform() * 2 - 1) * spread);
  return v;
}

// The filtered distribution written out independently of the sampler: sort by
// logit, softmax in double at temperature T, keep top-k, then the top-p prefix,
// then tokens with p >= min_p * p_max, renormalise.
std::map<int32_t, double> expected_distribution(const std::vector<float>& logits, const SamplingParams& sp) {
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (sp.top_k > 0 && static_cast<size_t>(sp.top_k) < idx.size()) idx.resize(static_cast<size_t>(sp.top_k));
  std::vector<double> p;
  double mx = logits[idx[0]] / sp.temperature, sum = 0;
  for (int32_t i : idx) sum += std::exp(logits[i] / sp.temperature - mx);
  for (int32_t i : idx) p.push_back(std::exp(logits[i] / sp.temperature - mx) / sum);
  size_t keep = p.size();
  if (sp.top_p < 1.0f) {
    double mass = 0;
    for (keep = 0; keep < p.size();) {
      mass += p[keep++];
      if (mass >= sp.top_p) break;
    }
  }
  size_t keep2 = 1;
  while (keep2 < keep && (sp.min_p <= 0 || p[keep2] >= sp.min_p * p[0])) ++keep2;
  std::map<int32_t, double> out;
  double total = 0;
  for (size_t i = 0; i < keep2; ++i) total += p[i];
  for (size_t i = 0; i < keep2; ++i) out[idx[i]] = p[i] / total;
  return out;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIndexOnTies) {
  SamplingParams sp;
  sp.temperature = 0;
  Sampler s(sp);
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(logits, {}), 1);
  EXPECT_EQ(argmax(logits), 1);
}

// plain_greedy() says when sample() is the raw argmax, so that a GPU model may
// return the argmax alone: it must be false whenever a penalty could move the
// argmax, and sample() must equal argmax() whenever it is true.
TEST(Sampler, PlainGreedyExactlyWhenNoPenaltyCanMoveTheArgmax) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.repetition_penalty = 1.0f;
  EXPECT_TRUE(Sampler(sp).plain_greedy(10, 4));
  sp.temperature = 0.7f;
  EXPECT_FALSE(Sampler(sp).plain_greedy(10, 4));  // sampled, not greedy
  sp.temperature = 0;
  sp.repetition_penalty = 1.3f;
  EXPECT_FALSE(Sampler(sp).plain_greedy(10, 4));
  EXPECT_TRUE(Sampler(sp).plain_greedy(0, 0));    // nothing to penalise yet
  sp.repetition_penalty = 1.0f;
  sp.frequency_penalty = 0.5f;
  EXPECT_FALSE(Sampler(sp).plain_greedy(10, 4));  // output tokens exist
  EXPECT_TRUE(Sampler(sp).plain_greedy(4, 4));    // only the prompt so far
  sp.frequency_penalty = 0;
  sp.presence_penalty = 0.5f;
  EXPECT_FALSE(Sampler(sp).plain_greedy(10, 4));

  // A repetition penalty that moves the argmax: token 1 leads, but it is in
  // the context and the penalty sends the choice to token 3.
  const std::vector<float> logits = {0.0f, 2.0f, -1.0f, 1.9f};
  const std::vector<int32_t> context = {1};
  sp.presence_penalty = 0;
  sp.repetition_penalty = 1.5f;
  Sampler penalised(sp);
  ASSERT_FALSE(penalised.plain_greedy(context.size(), 0));
  EXPECT_EQ(penalised.sample(logits, context), 3);
  sp.repetition_penalty = 1.0f;
  Sampler plain(sp);
  ASSERT_TRUE(plain.plain_greedy(context.size(), 0));
  EXPECT_EQ(plain.sample(logits, context), argmax(logits));
}

TEST(Sampler, FilteredDistributionMatchesIndependentComputation) {
  for (int trial = 0; trial < 50; ++trial) {
    auto logits = random_logits(200, static_cast<uint64_t>(trial));
    SamplingParams sp;
    sp.temperature = 0.5f + 0.1f * static_cast<float>(trial % 10);
    sp.top_k = trial % 3 == 0 ? 0 : 5 + trial;
    sp.top_p = trial % 4 == 0 ? 1.0f : 0.8f;
    sp.min_p = trial % 5 == 0 ? 0.0f : 0.02f;
    sp.seed = 1;
    Sampler s(sp);
    auto got = s.distribution(logits, {});
    auto want = expected_distribution(logits, sp);
    ASSERT_EQ(got.size(), want.size()) << "trial " << trial;
    for (const auto& tp : got) ASSERT_NEAR(tp.p, want.at(tp.id), 1e-12) << "trial " << trial;
  }
}

// A head over part of the vocabulary leaves the other tokens at -inf: the
// distribution is then the one over the finite tokens alone, bit for bit
// (same ids, same probabilities), with penalties and every filter, and no draw
// ever lands on a -inf token.
TEST(Sampler, MinusInfinityTokensAreLeftOutWithoutChangingTheRest) {
  for (int trial = 0; trial < 40; ++trial) {
    auto finite = random_logits(120, static_cast<uint64_t>(100 + trial));
    std::vector<float> logits;
    std::vector<int32_t> ids;  // id in `logits` of each finite entry
    for (size_t i = 0; i < finite.size(); ++i) {
      while (logits.size() % 3 != 1 || (trial % 2 == 0 && logits.size() < 5)) logits.push_back(-INFINITY);
      ids.push_back(static_cast<int32_t>(logits.size()));
      logits.push_back(finite[i]);
    }
    SamplingParams sp;
    sp.temperature = trial % 4 == 0 ? 0.0f : 0.6f + 0.1f * static_cast<float>(trial % 5);
    sp.top_k = trial % 3 == 0 ? 0 : 10 + trial;
    sp.top_p = trial % 5 == 0 ? 1.0f : 0.9f;
    sp.min_p = trial % 7 == 0 ? 0.0f : 0.01f;
    sp.repetition_penalty = trial % 2 == 0 ? 1.0f : 1.3f;
    sp.frequency_penalty = trial % 3 == 1 ? 0.5f : 0.0f;
    sp.seed = static_cast<uint64_t>(trial);
    // The history penalises finite and -inf tokens alike.
    const std::vector<int32_t> history = {ids[3], 0, ids[7], 2, ids[3]};
    std::vector<int32_t> history_finite;  // the same tokens in the finite-only vocabulary (-inf ones dropped)
    for (int32_t t : history)
      if (auto it = std::find(ids.begin(), ids.end(), t); it != ids.end())
        history_finite.push_back(static_cast<int32_t>(it - ids.begin()));
    Sampler with_inf(sp), without(sp);
    auto got = with_inf.distribution(logits, history, 1);
    auto want = without.distribution(finite, history_finite, std::min<size_t>(1, history_finite.size()));
    ASSERT_EQ(got.size(), want.size()) << "trial " << trial;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].id, ids[static_cast<size_t>(want[i].id)]) << "trial " << trial;
      ASSERT_EQ(got[i].p, want[i].p) << "trial " << trial;
    }
    for (int d = 0; d < 200; ++d) {
      const int32_t x = with_inf.sample(logits, history, 1);
      ASSERT_TRUE(std::isfinite(logits[static_cast<size_t>(x)])) << "trial " << trial;
    }
  }
}

// Chi-square goodness of fit of 200k draws against the exact distribution.
// The threshold is the 1 - 1e-6 quantile for the degrees of freedom used, so
// a correct sampler fails this test with probability 1e-6 per run (and the
// seed is fixed, so the run is reproducible).
double chi_square_quantile_1e6(int dof) {
  // Wilson–Hilferty approximation of the chi-square quantile; z = 4.753 for 1 - 1e-6.
  const double z = 4.753, k = dof;
  double t = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
  return k * t * t * t;
}

double chi_square(const std::map<int32_t, double>& p, const std::map<int32_t, int>& counts, int n) {
  double chi = 0;
  for (const auto& [id, prob] : p) {
    double e = prob * n;
    auto it = counts.find(id);
    double o = it == counts.end() ? 0 : it->second;
    chi += (o - e) * (o - e) / e;
  }
  return chi;
}

TEST(Sampler, DrawsFollowTheFilteredDistribution) {
  auto logits = random_logits(50, 7, 2.0f);
  SamplingParams sp;
  sp.temperature = 0.9f;
  sp.top_k = 30;
  sp.top_p = 0.97f;
  sp.min_p = 0.01f;
  sp.seed = 12345;
  Sampler s(sp);
  auto want = expected_distribution(logits, sp);
  const int n = 200000;
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) counts[s.sample(logits, {})]++;
  for (const auto& [id, c] : counts) ASSERT_TRUE(want.count(id)) << "drew filtered-out token " << id;
  double chi = chi_square(want, counts, n);
  EXPECT_LT(chi, chi_square_quantile_1e6(static_cast<int>(want.size()) - 1));

  // A deliberately wrong sampler (temperature ignored) must fail the same test.
  SamplingParams wrong = sp;
  wrong.temperature = 1.0f;
  Sampler bad(wrong);
  std::map<int32_t, int> bad_counts;
  for (int i = 0; i < n; ++i) bad_counts[bad.sample(logits, {})]++;
  EXPECT_GT(chi_square(want, bad_counts, n), chi_square_quantile_1e6(static_cast<int>(want.size()) - 1));
}

TEST(Sampler, SeededSamplersAreReproducible) {
  auto logits = random_logits(1000, 3);
  SamplingParams sp;
  sp.seed = 99;
  Sampler a(sp), b(sp);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.sample(logits, {}), b.sample(logits, {}));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.repetition_penalty = 2.0f;
  Sampler s(sp);
  std::vector<float> logits = {2.0f, -1.0f, 0.5f};
  std::vector<int32_t> history = {0, 1, 0};
  auto d = s.distribution(logits, history);
  std::map<int32_t, float> got;
  for (auto& t : d) got[t.id] = t.logit;
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], -2.0f);
  EXPECT_EQ(got[2], 0.5f);
}

// A device that samples a row is handed one uniform per token; the host
// must take exactly one too, or a request's stream would depend on where
// its rows were sampled.
TEST(Sampler, TakesOneUniformPerSampledTokenEvenWithOneSurvivor) {
  for (int32_t top_k : {1, 0}) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = top_k;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 11;
    Sampler s(p);
    const std::vector<float> logits = random_logits(50, 3);
    for (int i = 0; i < 5; ++i) s.sample(logits, {});
    Rng reference(11);
    for (int i = 0; i < 5; ++i) reference.uniform();
    EXPECT_EQ(s.rng().next(), reference.next()) << "top_k " << top_k;
  }
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.repetition_penalty = 1.5f;
  greedy.seed = 11;
  Sampler g(greedy);
  g.sample(random_logits(50, 3), std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(g.rng().next(), Rng(11).next()) << "greedy draws nothing";
}

TEST(Sampler, PenalisedTokensListEachDistinctTokenWithItsCountsOnce) {
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  p.repetition_window = 3;
  p.frequency_penalty = 0.5f;
  Sampler s(p);
  // prompt 7 8 7 | output 9 7 9: window = the last 3 tokens (9 7 9).
  const std::vector<int32_t> context{7, 8, 7, 9, 7, 9};
  const std::vector<PenalisedToken> got = s.penalised_tokens(context, 3);
  std::map<int32_t, std::pair<int32_t, bool>> by_id;
  for (const PenalisedToken& t : got) EXPECT_TRUE(by_id.emplace(t.id, std::make_pair(t.output_count, t.in_window)).second);
  EXPECT_EQ(by_id.size(), 2u);
  EXPECT_EQ(by_id.at(9), std::make_pair(2, true));
  EXPECT_EQ(by_id.at(7), std::make_pair(1, true));
  p.repetition_penalty = 1.0f;
  p.frequency_penalty = 0.0f;
  EXPECT_TRUE(Sampler(p).penalised_tokens(context, 3).empty());
}

}  // namespace
}  // namespace exactly
