#include "engine/speculation_policy.h"

#include <algorithm>

namespace exactly {

SpeculationPolicy::SpeculationPolicy(const SpeculationConfig& config, const DraftCosts& costs)
    : config_(config), costs_(costs) {}

std::vector<DraftDecision> SpeculationPolicy::plan(std::span<const DraftCandidate> decoding, int64_t budget) {
  std::vector<DraftDecision> jobs;
  std::optional<Step> step = step_for(static_cast<int64_t>(decoding.size()));
  if (!step) return jobs;
  for (const DraftCandidate& c : decoding) {
    if (step->probing && step->probe_left <= 0) break;
    const std::optional<DraftDecision> job = decide(c, *step, budget, !jobs.empty());
    if (!job) continue;
    jobs.push_back(*job);
    budget -= job->k;
    step->probe_left -= job->k;
  }
  if (jobs.empty() && !decoding.empty() && !step->probing) all_.fade_pooled(kPooledFadePerIdleStep);
  return jobs;
}

void SpeculationPolicy::record_verify(AcceptanceStats& own, std::span<const double> confidence, int32_t drafted,
                                      int32_t accepted) {
  own.record(drafted, accepted);
  if (confidence.size() == static_cast<size_t>(drafted)) confidence_.record(confidence, accepted);
  all_.record(drafted, accepted);
}

// A draft model that has to catch up decides by a pooled rate that a few
// rejections cannot push below the prior: its catch-up grows while it waits,
// so an estimate it stopped on would never be tested again. The other
// proposers come back by fading alone. While probing, the fit is not there
// yet and the drafts' costs are not weighed; a draft model's catch-up is
// priced, until its passes give a fit, from the target's costs.
std::optional<SpeculationPolicy::Step> SpeculationPolicy::step_for(int64_t num_decoding) const {
  Step step;
  step.all_rate = costs_.catches_up() ? all_.pooled_rate_to_decide_by(kPooledPriorDrafts)
                                      : all_.pooled_acceptance_rate(kPooledPriorDrafts);
  step.fit = step_cost_.fit();
  step.probing = config_.adaptive && !step.fit;
  if (step.probing && !step_cost_.mean_seconds()) return std::nullopt;
  if (step.fit) {
    const double draft_pass = costs_.draft_pass_seconds(num_decoding, step.fit).value_or(0.0);
    step.relative_cost = relative_verify_cost(*step.fit, num_decoding, draft_pass);
    step.share = request_share_seconds(*step.fit, num_decoding);
  }
  step.probe_left = probe_draft_tokens(num_decoding);
  return step;
}

std::optional<DraftDecision> SpeculationPolicy::decide(const DraftCandidate& c, const Step& step, int64_t budget,
                                                       bool others_drafted) const {
  const double rate = c.acceptance->shrunk_acceptance_rate(step.all_rate, kAcceptanceShrink);
  int64_t k = config_.max_drafts;
  // The probe is a measurement: fewer drafts than it needs leave the cost
  // model without a fit. Prompt lookup may find fewer than asked; the probe
  // then goes on next step.
  if (step.probing)
    k = std::min(step.probe_left, k);
  else if (config_.adaptive)
    k = draft_length_for_cost(rate, step.relative_cost, config_.max_drafts);
  // The catch-up gate prices the length the rate gives; a confident run may
  // go further, an unsure draft ends it sooner.
  const int64_t k_by_rate = k;
  const bool confident_run =
      config_.adaptive && config_.confident_runs && !step.probing && k > 0 && costs_.catches_up();
  if (confident_run) k = config_.max_drafts;
  k = std::min(k, room(*c.request, budget));
  if (k <= 0) {
    c.acceptance->fade();
    return std::nullopt;
  }
  if (config_.adaptive && !step.probing) {
    const std::optional<double> catch_up = costs_.catch_up_seconds(*c.request, step.fit);
    if (catch_up && *catch_up > 0 &&
        *catch_up > drafting_savings_seconds(rate, static_cast<int32_t>(std::min(k, k_by_rate)), step.relative_cost,
                                             c.remaining, step.share)) {
      c.acceptance->fade();
      return std::nullopt;
    }
  }
  DraftDecision job{c.request, static_cast<int32_t>(k), false, std::nullopt, 1.0};
  job.lookup = step.probing && costs_.drafts_with_model() && (costs_.catches_up() || others_drafted);
  if (confident_run) {
    job.continue_above = draft_continuation_threshold(rate, step.relative_cost, config_.max_drafts);
    job.confidence_scale = confidence_.scale();
  }
  return job;
}

// The last token is sampled, so drafts stop one short of max_tokens and of
// the context; a verify is never split, so they fit the long-prefill cap and
// the step's budget.
int64_t SpeculationPolicy::room(const Request& r, int64_t budget) const {
  int64_t n = r.max_tokens - r.num_output_tokens() - 1;
  n = std::min(n, config_.max_model_len - r.num_tokens() - 1);
  if (config_.long_prefill_token_threshold > 0) n = std::min(n, config_.long_prefill_token_threshold - 1);
  return std::min(n, budget);
}

}  // namespace exactly
