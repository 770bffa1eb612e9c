#include "engine/step_cost.h"

#include <algorithm>
#include <cmath>

#include "speculative/acceptance_stats.h"

namespace exactly {

namespace {

// Weighted variance of the observed step sizes (tokens²) from which a first
// slope is taken as identified whatever the noise: the probe's two steps, 3
// tokens apart, have no residual to judge the noise by.
constexpr double kMinSizeVariance = 1.0;
// Below it, and for a slope that would replace an earlier one at any size
// variance, the slope counts once its standard error, times the mean step
// size, is at most this share of the mean step: the error it puts into the
// relative cost of a draft. (A single request whose prompt lookup matches
// now and then steps 1 or 2 tokens, a variance of 0.25 at most: never a fit,
// so it drafted at an acceptance of 0.11 for a verify that costs 0.16 a
// draft. 64 requests finishing one by one after the probe step sizes 64 down
// to 61, a variance past 1 once the probe's weight had faded: taken whatever
// the noise, the slope of 300 ms steps a token or three apart fell to 0,
// verifying looked free, and a draft model caught up on 2,048 tokens of
// context.)
constexpr double kMaxRelativeSlopeError = 0.1;
// Effective number of steps the standard error needs before it is trusted.
constexpr double kMinEffectiveSteps = 10.0;
// Size variance below which nothing is fitted at all: one step in twenty a
// token apart. (As the variance decays towards 0 in a run of one-size steps,
// the slope is a difference of nearly equal sums, and rounding decides it.)
constexpr double kMinSizeVarianceAtAll = 0.05;

}  // namespace

void StepCostModel::observe(int64_t tokens, double seconds) {
  const double n = static_cast<double>(tokens), decay = 1.0 - weight_;
  w_ = decay * w_ + weight_;
  wn_ = decay * wn_ + weight_ * n;
  wt_ = decay * wt_ + weight_ * seconds;
  wnn_ = decay * wnn_ + weight_ * n * n;
  wnt_ = decay * wnt_ + weight_ * n * seconds;
  wtt_ = decay * wtt_ + weight_ * seconds * seconds;
  ww_ = decay * decay * ww_ + weight_ * weight_;
  if (const auto f = current_fit(last_fit_.has_value())) last_fit_ = f;
}

std::optional<StepCostModel::Fit> StepCostModel::fit() const { return last_fit_; }

std::optional<StepCostModel::Fit> StepCostModel::current_fit(bool replacing) const {
  if (w_ <= 0) return std::nullopt;
  const double mean_n = wn_ / w_, mean_t = wt_ / w_;
  const double var_n = wnn_ / w_ - mean_n * mean_n;
  if (var_n < kMinSizeVarianceAtAll) return std::nullopt;
  const double slope = (wnt_ / w_ - mean_n * mean_t) / var_n;
  const double effective = w_ * w_ / ww_;
  if (var_n < kMinSizeVariance || replacing) {
    // Standard error of a weighted least-squares slope: residual variance
    // over (effective steps x size variance), the residual corrected for the
    // two fitted terms.
    if (effective < kMinEffectiveSteps) return std::nullopt;
    const double residual = std::max(0.0, wtt_ / w_ - mean_t * mean_t - slope * slope * var_n);
    const double se = std::sqrt(residual / (effective - 2) / var_n);
    if (se * std::max(1.0, mean_n) > kMaxRelativeSlopeError * mean_t) return std::nullopt;
  }
  const double per_token = std::max(0.0, slope);
  const double fixed = std::max(0.0, mean_t - per_token * mean_n);
  return Fit{fixed, per_token};
}

std::optional<double> StepCostModel::mean_seconds() const {
  if (w_ <= 0) return std::nullopt;
  return wt_ / w_;
}

double relative_verify_cost(const StepCostModel::Fit& fit, int64_t decoding, double draft_pass_seconds) {
  const double b = fit.per_token * static_cast<double>(std::max<int64_t>(1, decoding));
  const double total = fit.fixed + b;
  return total > 0 ? (b + draft_pass_seconds) / total : 1.0;
}

int64_t probe_draft_tokens(int64_t decoding) { return std::max<int64_t>(3, decoding); }

namespace {

struct BestLength {
  int32_t k = 0;
  double tokens_per_cost = 0;
};

BestLength best_draft_length(double acceptance_rate, double relative_cost, int32_t k_max) {
  BestLength best;
  for (int32_t k = 1; k <= k_max; ++k) {
    const double value = expected_tokens_per_verify(acceptance_rate, k) / (1.0 + k * relative_cost);
    if (value > best.tokens_per_cost) best = {k, value};
  }
  return best;
}

}  // namespace

int32_t draft_length_for_cost(double acceptance_rate, double relative_cost, int32_t k_max) {
  const BestLength best = best_draft_length(acceptance_rate, relative_cost, k_max);
  // k = 0: one token for one unit of cost.
  return best.tokens_per_cost > 1.0 + kDraftingMargin ? best.k : 0;
}

double draft_continuation_threshold(double acceptance_rate, double relative_cost, int32_t k_max) {
  if (acceptance_rate <= 0) return 1.0;  // nothing is accepted: no further draft pays
  const double best = std::max(1.0, best_draft_length(acceptance_rate, relative_cost, k_max).tokens_per_cost);
  return relative_cost * best / acceptance_rate;
}

double request_share_seconds(const StepCostModel::Fit& fit, int64_t decoding) {
  const double n = static_cast<double>(std::max<int64_t>(1, decoding));
  return (fit.fixed + fit.per_token * n) / n;
}

double drafting_savings_seconds(double acceptance_rate, int32_t k, double relative_cost, int64_t remaining,
                                double share_seconds) {
  if (k <= 0 || remaining <= 0) return 0.0;
  // Priced as draft_length_for_cost prices it: a gain within the margin is
  // not counted on.
  const double cost_per_token =
      (1.0 + k * relative_cost) * (1.0 + kDraftingMargin) / expected_tokens_per_verify(acceptance_rate, k);
  return std::max(0.0, static_cast<double>(remaining) * share_seconds * (1.0 - cost_per_token));
}

}  // namespace exactly
