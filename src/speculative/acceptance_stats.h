// Per-request record of how speculation is paying off.
//
// Model each draft as accepted independently with rate a. A verify of k
// drafts then emits E(k) = 1 + a + ... + a^k = (1 - a^(k+1)) / (1 - a) tokens
// (Leviathan et al. 2023). The engine weighs E(k) against the measured cost
// of drafting and verifying k tokens (engine/step_cost.h,
// draft_length_for_cost); this record supplies a.
//
// a is estimated from exponential moving averages of two counts per verify:
// drafts accepted and drafts *examined* (accepted + the one rejected, if any).
// Drafts after a rejection were never tested, so counting them would bias a
// downwards; the ratio of the two averages is the recent maximum-likelihood
// rate under the model above.
#pragma once

#include <cstdint>

namespace exactly {

struct AcceptanceStatsConfig {
  double ema_weight = 0.2;             // weight of the newest verify in the moving averages, in (0, 1]
  double prior_rate = 0.5;             // acceptance rate assumed before the first verify
};

// Expected tokens emitted by one verify of k drafts at acceptance rate a.
double expected_tokens_per_verify(double acceptance_rate, int32_t k);

class AcceptanceStats {
 public:
  explicit AcceptanceStats(const AcceptanceStatsConfig& config = {});

  // One verify: `num_drafted` drafts were checked and the first `num_accepted` kept.
  void record(int32_t num_drafted, int32_t num_accepted);

  int64_t num_verifies() const { return verifies_; }
  int64_t num_drafted() const { return drafted_; }
  int64_t num_accepted() const { return accepted_; }
  // accepted / drafted over the request's life (0 before any draft).
  double acceptance_rate() const;
  // Accepted drafts per verify (0 before any verify); tokens per verify is one more.
  double mean_accepted_length() const;
  // The recent per-draft acceptance rate (the prior before any verify).
  double recent_acceptance_rate() const;
  // The recent rate shrunk towards `prior` as if `weight` more drafts per
  // verify had been examined at that rate (the prior alone before any
  // verify). A request drafts when its estimate is high, which is most often
  // just after a lucky verify; shrinking towards what drafts of all requests
  // achieve keeps one or two lucky verifies from paying for a run of losses.
  double shrunk_acceptance_rate(double prior, double weight) const;
  // Per-draft acceptance over the request's life: accepted / examined (the
  // prior before any verify).
  double lifetime_acceptance_rate() const;
  // The lifetime rate (less what fade_pooled took) shrunk towards the
  // configured prior as if `weight` more drafts had been examined at it. As
  // the prior of every request's estimate it must not be decided by the first
  // verify: a probe whose two drafts were rejected made the plain lifetime
  // rate 0, every request's estimate followed it to 0, and nothing drafted
  // again to revise it.
  double pooled_acceptance_rate(double weight) const;
  // The pooled rate to decide whether to draft by: no lower than the prior
  // while the prior lies within one standard error of it. Drafting is how
  // the estimate learns, so one that a few rejections put below what pays
  // would never be revised: one chat request whose first two drafts were
  // rejected had its pooled rate at 0.40 against a draft's 0.55, and with
  // its catch-up growing as it went on, never drafted again (a quarter of
  // such runs). With evidence the standard error shrinks and the rate rules.
  double pooled_rate_to_decide_by(double weight) const;
  // A step in which nothing drafted: the pooled evidence counts for a share
  // `factor` less, so the pooled rate drifts back to the prior. Requests fade
  // towards the pooled rate, so one that a bad stretch pushed below what pays
  // would keep every request, present and future, from ever drafting again.
  void fade_pooled(double factor);
  // A step in which the request drafted nothing: the recent averages lose
  // weight as they do when a verify is recorded, so shrunk_acceptance_rate()
  // drifts back to its prior. Estimates only change at a verify, so one that
  // a run of rejections pushed below what pays would otherwise never be
  // revised: the request would not draft again.
  void fade();

 private:
  AcceptanceStatsConfig config_;
  int64_t verifies_ = 0;
  int64_t drafted_ = 0;
  int64_t accepted_ = 0;
  int64_t examined_ = 0;
  double pooled_accepted_ = 0;  // the lifetime counts, less what fade_pooled took
  double pooled_examined_ = 0;
  double ema_accepted_ = 0;  // moving average of accepted drafts per verify
  double ema_examined_ = 0;  // moving average of examined drafts per verify
};

}  // namespace exactly
