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
  // None until the observed step sizes vary enough to separate the two terms
  // — by a few tokens (the probe), or by less (a single request drafting one
  // token now and then) over enough steps that the slope's standard error is
  // small against a step — and once they have, the fit of the last time they
  // did. A fit replaces an earlier one only once its standard error is small,
  // whatever the spread of sizes: steps a few tokens apart whose noise hides
  // the slope are no evidence against the probe's.
  // When speculation turns itself off, steps become one size and the slope
  // stops being identifiable: forgetting it sent the decision back to its
  // optimistic prior, which drafted again, at a loss, until the slope was
  // learned anew.
  std::optional<Fit> fit() const;
  // Weighted mean seconds per step; none before the first. What a step costs
  // when the sizes do not vary enough for fit(), as a draft pass that feeds
  // one token per request does in steady state.
  std::optional<double> mean_seconds() const;

 private:
  double weight_;
  // The fit the sums give now, if they identify one; `replacing` an earlier
  // fit, only with a small standard error.
  std::optional<Fit> current_fit(bool replacing) const;
  // Weighted sums of 1, n, t, n², n·t, t², and of the squared weights.
  double w_ = 0, wn_ = 0, wt_ = 0, wnn_ = 0, wnt_ = 0, wtt_ = 0, ww_ = 0;
  std::optional<Fit> last_fit_;
};

// Cost of one more verified token relative to a request's share of a step in
// which `decoding` requests decode (one token each): (per_token · decoding +
// draft_pass_seconds) / (fixed + per_token · decoding), where
// draft_pass_seconds is what drafting one more position costs for all of
// them (one pass of a draft model; 0 for prompt lookup).
double relative_verify_cost(const StepCostModel::Fit& fit, int64_t decoding, double draft_pass_seconds = 0.0);

// Drafts per verify of pseudo-evidence at the lifetime rate of every
// request's drafts that a request's own recent rate is shrunk towards
// (AcceptanceStats::shrunk_acceptance_rate).
constexpr double kAcceptanceShrink = 2.0;
// Drafts of pseudo-evidence at the configured prior rate in that lifetime rate
// (AcceptanceStats::pooled_acceptance_rate): a few verifies cannot set it alone.
constexpr double kPooledPriorDrafts = 8.0;
// The share of that pooled evidence a step in which no request drafts takes
// away (AcceptanceStats::fade_pooled): after a bad stretch, drafts are tried
// again within a few hundred steps, a test that costs one verify.
constexpr double kPooledFadePerIdleStep = 0.01;

// Drafts in all that a probe adds to a plain step of `decoding` requests:
// at least 3, the fewest that let StepCostModel::fit() separate its two terms
// at once (with the plain step and the probe about equally weighted, sizes 3
// tokens apart give a variance of (3/2)², past its threshold), and at least
// one per request, so that the step grows by as much as its noise allows a
// slope to be read from. The engine takes up to k from each request; they are
// prompt lookups, which cost nothing to make (layer skipping makes one
// request's).
int64_t probe_draft_tokens(int64_t decoding);

// How much more than a plain step's one token per unit of cost drafting must
// promise. The fit is used once its slope's standard error is within 0.1 of
// a step per token (StepCostModel::fit), so at k = 1 the cost 1 + c may be
// off by that much, and a's estimate is noisier still: a draft predicted to
// gain a few percent gains nothing, or loses, as often as not. (Seen: 16 chat
// requests drafting k = 1 near a predicted 1.0 ran at x0.84-0.89.)
constexpr double kDraftingMargin = 0.05;

// Draft length in [0, k_max] that maximises expected tokens per unit of cost,
// E(k) / (1 + k · relative_cost), where E(k) = 1 + a + ... + a^k, if that
// beats a plain step by kDraftingMargin; 0 means speculation does not pay
// for this request in this step.
int32_t draft_length_for_cost(double acceptance_rate, double relative_cost, int32_t k_max);

// The least estimated probability that every draft so far is accepted at
// which a draft model should make one more (DraftRequest::continue_above).
// The next draft, accepted with probability `acceptance_rate` once the
// earlier ones are, adds P x a tokens for `relative_cost`; that raises the
// tokens a step's cost buys when it beats the best ratio drafting at a fixed
// length offers, V = max over k <= k_max of E(k) / (1 + k c): P >= c V / a.
// With no estimate per draft (P = a^j) this is the rule that makes
// draft_length_for_cost's k; with one, a confident run goes further and an
// unsure draft ends it.
double draft_continuation_threshold(double acceptance_rate, double relative_cost, int32_t k_max);

// A request's share of a step in which `decoding` requests decode: the
// fitted step over their number.
double request_share_seconds(const StepCostModel::Fit& fit, int64_t decoding);

// Seconds that drafting k tokens a step, at `acceptance_rate` and a draft's
// `relative_cost`, saves a request with `remaining` tokens to generate whose
// plain steps cost it `share_seconds` each, beyond kDraftingMargin:
// remaining · share · (1 − (1 + k · relative_cost) (1 + margin) / E(k)), at
// least 0. What a draft model's catch-up on the request's context must stay
// under for drafting to pay.
double drafting_savings_seconds(double acceptance_rate, int32_t k, double relative_cost, int64_t remaining,
                                double share_seconds);

}  // namespace exactly
