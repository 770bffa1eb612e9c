// The measured cost of a forward pass as a function of how many tokens it
// computes: seconds ≈ fixed + per_token · tokens, fitted by exponentially
// weighted least squares over recent steps. Speculation asks it whether
// verifying k more tokens per request costs less than the tokens it gains.
#pragma once

#include <cstdint>
#include <optional>

namespace exactly {

class StepCostModel {
 public:
  // weight: how much the newest step counts, in (0, 1].
  explicit StepCostModel(double weight = 0.05) : weight_(weight) {}

  void observe(int64_t tokens, double seconds);

  struct Fit {
    double fixed;      // seconds per step whatever its size (weights streamed once)
    double per_token;  // seconds per additional token
  };
  // None until the observed step sizes vary enough to separate the two terms;
  // once they have, the fit of the last time they did. When speculation turns
  // itself off, steps become one size and the slope stops being identifiable:
  // forgetting it sent the decision back to its optimistic prior, which drafted
  // again, at a loss, until the slope was learned anew.
  std::optional<Fit> fit() const;
  // Weighted mean seconds per step; none before the first. What a step costs
  // when the sizes do not vary enough for fit(), as a draft pass that feeds
  // one token per request does in steady state.
  std::optional<double> mean_seconds() const;

 private:
  double weight_;
  std::optional<Fit> current_fit() const;
  double w_ = 0, wn_ = 0, wt_ = 0, wnn_ = 0, wnt_ = 0;  // weighted sums of 1, n, t, n², n·t
  std::optional<Fit> last_fit_;
};

// Cost of one more verified token relative to a request's share of a step in
// which `decoding` requests decode (one token each): (per_token · decoding +
// draft_pass_seconds) / (fixed + per_token · decoding), where
// draft_pass_seconds is what drafting one more position costs for all of
// them (one pass of a draft model; 0 for prompt lookup).
double relative_verify_cost(const StepCostModel::Fit& fit, int64_t decoding, double draft_pass_seconds = 0.0);

// The cost of one more draft position per request relative to a request's
// share of a step, whatever is known: with a fit, relative_verify_cost; without
// one (steady steps of one size), `prior_verify_cost` plus the measured draft
// pass over the mean step. -1 when neither decides — nothing measured yet, or
// a proposer that costs nothing to run (prompt lookup) with no fit: the
// acceptance statistics' own prior then picks k.
double relative_speculation_cost(const StepCostModel& target, std::optional<double> draft_pass_seconds,
                                 int64_t decoding, double prior_verify_cost);

// Drafts per request that make a verify step of `decoding` requests differ
// enough in size from their plain steps for StepCostModel::fit() to separate
// its two terms: the fewest that probe the cost of verifying.
int64_t probe_draft_length(int64_t decoding);

// Draft length in [0, k_max] that maximises expected tokens per unit of cost,
// E(k) / (1 + k · relative_cost), where E(k) = 1 + a + ... + a^k; 0 means
// speculation does not pay for this request in this step.
int32_t draft_length_for_cost(double acceptance_rate, double relative_cost, int32_t k_max);

}  // namespace exactly
