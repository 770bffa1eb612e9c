// The speculation policy on a fake clock: a target whose steps cost
// fixed + per_token · tokens (with a little noise), a proposer whose drafts
// are accepted independently at a set rate, and requests that generate what
// their verifies emit. The clock, not a machine, decides what pays, so the
// properties are exact: the policy drafts where drafting buys tokens per
// second, never costs more than the probe where it does not, and keeps
// every job inside its request's room and the step's budget.
#include "engine/speculation_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

namespace exactly {
namespace {

struct FakeProposer : DraftCosts {
  bool model = false;             // drafts with a model's passes
  bool own_cache = false;         // catches up on each request's context
  double pass_seconds = 0;        // one draft position for all requests
  double catch_up_per_token = 0;  // seconds per context token to catch up on
  bool drafts_with_model() const override { return model; }
  bool catches_up() const override { return own_cache; }
  std::optional<double> draft_pass_seconds(int64_t, const std::optional<StepCostModel::Fit>&) const override {
    return pass_seconds;
  }
  std::optional<double> catch_up_seconds(const Request& r, const std::optional<StepCostModel::Fit>&) const override {
    return own_cache ? catch_up_per_token * static_cast<double>(r.num_tokens()) : 0.0;
  }
};

struct Target {
  double fixed;      // seconds per step
  double per_token;  // seconds per token computed
};

struct Outcome {
  double tokens_per_second;
  double plain_tokens_per_second;
  int64_t steps = 0;
  int64_t steps_drafting = 0;  // after the probe
  int64_t drafted = 0;
};

class Simulation {
 public:
  Simulation(Target target, int n, SpeculationConfig config, FakeProposer proposer = {}, uint32_t seed = 1)
      : target_(target), proposer_(proposer), policy_(config, proposer_), rng_(seed) {
    for (int i = 0; i < n; ++i) {
      auto r = std::make_unique<Request>();
      r->id = i;
      r->tokens.assign(static_cast<size_t>(40 + i), 7);
      r->num_prompt_tokens = r->num_tokens();
      r->max_tokens = 1 << 30;
      r->num_computed_tokens = r->num_tokens() - 1;
      r->status = RequestStatus::kRunning;
      requests_.push_back(std::move(r));
      stats_.emplace_back();
    }
  }

  // One step: the policy's jobs, their verifies at `acceptance`, the clock.
  std::vector<DraftDecision> step(double acceptance, int64_t budget = 1 << 20) {
    std::vector<DraftCandidate> candidates;
    for (size_t i = 0; i < requests_.size(); ++i) candidates.push_back({requests_[i].get(), &stats_[i], remaining});
    std::vector<DraftDecision> jobs = policy_.plan(candidates, budget);
    int64_t tokens = static_cast<int64_t>(requests_.size());
    for (const DraftDecision& d : jobs) tokens += d.k;
    const double noise = 1.0 + 0.01 * (std::uniform_real_distribution<double>(-1, 1)(rng_));
    const double forward = (target_.fixed + target_.per_token * static_cast<double>(tokens)) * noise;
    clock_ += forward + (jobs.empty() ? 0.0 : proposer_.pass_seconds * max_k(jobs));
    generated_ += static_cast<int64_t>(requests_.size());
    for (const DraftDecision& d : jobs) {
      int32_t accepted = 0;
      while (accepted < d.k && std::bernoulli_distribution(acceptance)(rng_)) ++accepted;
      generated_ += accepted;
      if (!d.lookup) policy_.record_verify(stats_[static_cast<size_t>(d.request->id)], {}, d.k, accepted);
    }
    policy_.observe_step(tokens, forward);
    for (auto& r : requests_) r->tokens.push_back(7), ++r->num_computed_tokens;
    return jobs;
  }

  Outcome run(int steps, double acceptance) {
    Outcome o{};
    for (int i = 0; i < steps; ++i) {
      const std::vector<DraftDecision> jobs = step(acceptance);
      ++o.steps;
      if (i > 10 && !jobs.empty()) ++o.steps_drafting;
      for (const DraftDecision& d : jobs) o.drafted += d.k;
    }
    o.tokens_per_second = static_cast<double>(generated_) / clock_;
    const double n = static_cast<double>(requests_.size());
    o.plain_tokens_per_second = n / (target_.fixed + target_.per_token * n);
    return o;
  }

  SpeculationPolicy& policy() { return policy_; }
  Request& request(size_t i) { return *requests_[i]; }
  AcceptanceStats& stats(size_t i) { return stats_[i]; }
  int64_t remaining = 1 << 20;  // every request's rest that drafting may count on

 private:
  static double max_k(const std::vector<DraftDecision>& jobs) {
    int32_t k = 0;
    for (const DraftDecision& d : jobs) k = std::max(k, d.k);
    return k;
  }
  Target target_;
  FakeProposer proposer_;
  SpeculationPolicy policy_;
  std::mt19937 rng_;
  std::vector<std::unique_ptr<Request>> requests_;
  std::vector<AcceptanceStats> stats_;
  double clock_ = 0;
  int64_t generated_ = 0;
};

SpeculationConfig adaptive(int32_t k = 3) {
  SpeculationConfig c;
  c.max_drafts = k;
  c.max_model_len = 1 << 30;
  return c;
}

// Memory-bound: a step's weights dominate, a token costs little.
constexpr Target kMemoryBound{0.010, 0.00005};
// Compute-bound: each token costs most of a plain step.
constexpr Target kComputeBound{0.001, 0.001};

TEST(SpeculationPolicy, DraftsNothingBeforeAPlainStepIsTimed) {
  Simulation sim(kMemoryBound, 4, adaptive());
  EXPECT_TRUE(sim.step(0.9).empty());
  EXPECT_FALSE(sim.step(0.9).empty()) << "the probe follows the first timed step";
}

TEST(SpeculationPolicy, TheProbeDraftsWhatTheFitNeedsAndNoMore) {
  for (int n : {1, 2, 16}) {
    Simulation sim(kMemoryBound, n, adaptive());
    sim.step(0.9);
    const std::vector<DraftDecision> probe = sim.step(0.9);
    int64_t total = 0;
    for (const DraftDecision& d : probe) {
      EXPECT_LE(d.k, 3);
      EXPECT_FALSE(d.lookup) << "prompt lookup's own drafts are the probe's";
      total += d.k;
    }
    EXPECT_EQ(total, probe_draft_tokens(n)) << n << " requests";
    EXPECT_TRUE(sim.policy().step_cost().fit().has_value()) << "one probe gives the fit";
  }
}

TEST(SpeculationPolicy, AModelDrafterProbesWithLookups) {
  FakeProposer draft_model;
  draft_model.model = draft_model.own_cache = true;
  Simulation catches_up(kMemoryBound, 4, adaptive(), draft_model);
  catches_up.step(0.9);
  for (const DraftDecision& d : catches_up.step(0.9)) EXPECT_TRUE(d.lookup) << "no catch-up for a measurement";

  FakeProposer layerskip;
  layerskip.model = true;
  Simulation skip(kMemoryBound, 4, adaptive(), layerskip);
  skip.step(0.9);
  const std::vector<DraftDecision> probe = skip.step(0.9);
  ASSERT_GE(probe.size(), 2u);
  EXPECT_FALSE(probe[0].lookup) << "the first request's drafts try the model";
  for (size_t i = 1; i < probe.size(); ++i) EXPECT_TRUE(probe[i].lookup);
}

TEST(SpeculationPolicy, DraftsTheMostWhereVerifyingIsCheapAndDraftsAreGood) {
  for (int n : {1, 8}) {
    Simulation sim(kMemoryBound, n, adaptive());
    const Outcome o = sim.run(400, 0.8);
    // E(3) at 0.8 is 2.95 tokens for a step a few percent dearer.
    EXPECT_GT(o.tokens_per_second, 2.3 * o.plain_tokens_per_second) << n << " requests";
    EXPECT_GT(o.steps_drafting, o.steps * 9 / 10);
  }
}

TEST(SpeculationPolicy, NeverFallsBelowPlainWhereVerifyingCostsAsMuchAsItGains) {
  for (double acceptance : {0.3, 0.7, 0.9}) {
    Simulation sim(kComputeBound, 16, adaptive());
    const Outcome o = sim.run(600, acceptance);
    EXPECT_GT(o.tokens_per_second, 0.97 * o.plain_tokens_per_second) << "acceptance " << acceptance;
    EXPECT_LT(o.steps_drafting, o.steps / 10) << "acceptance " << acceptance;
  }
}

TEST(SpeculationPolicy, BadDraftsStopDraftingAndAreTriedAgainLater) {
  Simulation sim(kMemoryBound, 4, adaptive());
  const Outcome bad = sim.run(300, 0.02);
  EXPECT_GT(bad.tokens_per_second, 0.95 * bad.plain_tokens_per_second);
  EXPECT_LT(bad.steps_drafting, bad.steps / 4);
  // The drafts turn good: faded estimates are tested again and drafting resumes.
  int drafting = 0;
  for (int i = 0; i < 300; ++i) drafting += sim.step(0.9).empty() ? 0 : 1;
  EXPECT_GT(drafting, 200);
}

TEST(SpeculationPolicy, ADraftModelCatchesUpOnlyWhenTheRestPaysForIt) {
  FakeProposer draft_model;
  draft_model.model = draft_model.own_cache = true;
  draft_model.pass_seconds = 0.001;
  draft_model.catch_up_per_token = 0.0005;  // 20 ms for a 40-token context: two plain steps
  for (int64_t remaining : {int64_t{1}, int64_t{1000}}) {
    Simulation sim(kMemoryBound, 1, adaptive(), draft_model);
    sim.remaining = remaining;
    sim.run(5, 0.8);
    const std::vector<DraftDecision> jobs = sim.step(0.8);
    EXPECT_EQ(jobs.empty(), remaining == 1) << remaining << " tokens left";
    for (const DraftDecision& d : jobs) {
      EXPECT_EQ(d.k, 3) << "a confident run may go to k";
      ASSERT_TRUE(d.continue_above.has_value());
      EXPECT_GT(*d.continue_above, 0);
      EXPECT_LT(*d.continue_above, 1);
    }
  }
}

TEST(SpeculationPolicy, JobsStayInsideTheRequestsRoomAndTheBudget) {
  SpeculationConfig fixed = adaptive(5);
  fixed.adaptive = false;
  fixed.long_prefill_token_threshold = 4;  // three drafts and the decoded token
  Simulation sim(kMemoryBound, 6, fixed);
  sim.request(0).max_tokens = sim.request(0).num_output_tokens() + 3;  // two drafts, then the last token
  const std::vector<DraftDecision> jobs = sim.step(0.9, 12);
  ASSERT_FALSE(jobs.empty()) << "fixed-k drafting needs no timing";
  int64_t total = 0;
  for (const DraftDecision& d : jobs) {
    EXPECT_LE(d.k, d.request->id == 0 ? 2 : 3);
    total += d.k;
  }
  EXPECT_EQ(total, 12) << "the budget is spent in request order and no further";
  EXPECT_EQ(jobs[0].k, 2);

  SpeculationConfig short_context = adaptive();
  short_context.adaptive = false;
  short_context.max_model_len = 42;  // request 0 holds 40 tokens: one draft, then the last position
  Simulation near_end(kMemoryBound, 1, short_context);
  const std::vector<DraftDecision> last = near_end.step(0.9);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].k, 1);
}

TEST(SpeculationPolicy, TheConfidenceScaleFollowsTheVerifiedDrafts) {
  FakeProposer draft_model;
  draft_model.model = draft_model.own_cache = true;
  Simulation sim(kMemoryBound, 1, adaptive(), draft_model);
  sim.run(3, 0.9);
  // Every draft accepted where the model gave each 0.3: the scale rises to
  // the accepted drafts per unit of confidence.
  const std::vector<double> unsure(3, 0.3);
  for (int i = 0; i < 200; ++i) sim.policy().record_verify(sim.stats(0), unsure, 3, 3);
  const std::vector<DraftDecision> jobs = sim.step(0.9);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_NEAR(jobs[0].confidence_scale, 1 / 0.3, 0.1);
}

}  // namespace
}  // namespace exactly
