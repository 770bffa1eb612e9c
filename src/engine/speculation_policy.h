// How many tokens each decoding request drafts in a step: the one place
// that weighs acceptance against the measured cost of verifying and of
// drafting. Given the requests that decode and what their steps have cost,
// it returns the drafting jobs; the speculator makes the drafts, the engine
// verifies them and reports back (record_verify, observe_step).
//
// The rules:
// - Nothing is drafted before a plain decode step has been timed.
// - Until the target's step cost model can tell a step's fixed cost from its
//   cost per token, a probe drafts just enough to let it
//   (probe_draft_tokens); its drafts are prompt lookups (which cost nothing
//   to make and inform no acceptance estimate), except that layer skipping
//   makes the first request's with the model.
// - After that, each request drafts the length that maximises its expected
//   tokens per unit of cost (draft_length_for_cost), at its own acceptance
//   shrunk towards every request's (AcceptanceStats), or nothing when no
//   length beats a plain step by kDraftingMargin.
// - A draft model with a cache of its own drafts for a request only once what
//   drafting saves over the request's rest outweighs catching up on its
//   context; it then drafts on while confident (draft_continuation_threshold).
// - A request that drafts nothing has its estimate faded towards every
//   request's, and a step in which none drafts fades that towards the prior,
//   so that a pessimistic estimate is tested again.
// - Drafts never pass max_tokens, the context, the long-prefill cap or the
//   step's token budget.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/step_cost.h"
#include "sched/request.h"
#include "speculative/acceptance_stats.h"
#include "speculative/draft_confidence.h"

namespace exactly {

// What drafting costs, as the proposer knows it (Speculator).
class DraftCosts {
 public:
  virtual ~DraftCosts() = default;
  // Drafts come from a model's forward passes (draft:PATH, layerskip:L, head:PATH).
  virtual bool drafts_with_model() const = 0;
  // The drafter computes a request's context before its first drafts for it.
  virtual bool catches_up() const = 0;
  // Seconds one draft position costs for `decoding` requests (0 for lookups);
  // `target` is the target's fitted step, a prior for an unmeasured drafter.
  virtual std::optional<double> draft_pass_seconds(int64_t decoding,
                                                   const std::optional<StepCostModel::Fit>& target) const = 0;
  // Seconds catching up on the request's context would take (0: nothing to catch up on).
  virtual std::optional<double> catch_up_seconds(const Request& r,
                                                 const std::optional<StepCostModel::Fit>& target) const = 0;
};

struct SpeculationConfig {
  int32_t max_drafts = 3;                    // k at most, per request and step
  bool adaptive = true;                      // false: always max_drafts (within the request's room)
  bool confident_runs = true;                // a confident draft model drafts on past the rate's length
  int64_t max_model_len = 0;                 // the context; the last position is sampled, never drafted
  int64_t long_prefill_token_threshold = 0;  // >0: a request's tokens per step
};

// A request that decodes this step (one token to compute, drafts allowed).
struct DraftCandidate {
  Request* request;
  AcceptanceStats* acceptance;  // its own verifies; faded in a step it drafts nothing
  int64_t remaining;            // tokens of its rest that drafting may count on saving
};

// What one request drafts this step.
struct DraftDecision {
  Request* request;
  int32_t k;                             // most drafts, >= 1
  bool lookup;                           // prompt lookups for the probe, whatever the proposer
  std::optional<double> continue_above;  // a draft model's run ends at a draft less sure than this
  double confidence_scale = 1;           // maps a draft's confidence to its acceptance
};

class SpeculationPolicy {
 public:
  SpeculationPolicy(const SpeculationConfig& config, const DraftCosts& costs);

  // The step's drafting jobs for `decoding` (in the order given, which is
  // the order the budget is handed out in), within `budget` tokens.
  std::vector<DraftDecision> plan(std::span<const DraftCandidate> decoding, int64_t budget);

  // A decode or verify step's forward pass and sampling: `tokens` computed in `seconds`.
  void observe_step(int64_t tokens, double seconds) { step_cost_.observe(tokens, seconds); }

  // A verify of the proposer's drafts (not the probe's lookups): the first
  // `accepted` of `drafted` were kept; `confidence` holds a draft model's
  // confidence in each (empty otherwise).
  void record_verify(AcceptanceStats& own, std::span<const double> confidence, int32_t drafted, int32_t accepted);

  const StepCostModel& step_cost() const { return step_cost_; }

 private:
  // What every request's job in one step is decided by.
  struct Step {
    double all_rate = 0;                    // every request's pooled acceptance
    std::optional<StepCostModel::Fit> fit;  // the target's step costs, once they fit
    bool probing = false;                   // drafting to measure the costs
    double relative_cost = 0;               // one more draft against a request's share of the step
    double share = 0;                       // a request's share of a step, seconds
    int64_t probe_left = 0;                 // drafts the probe still needs
  };
  std::optional<Step> step_for(int64_t num_decoding) const;
  std::optional<DraftDecision> decide(const DraftCandidate& c, const Step& step, int64_t budget,
                                      bool others_drafted) const;
  int64_t room(const Request& r, int64_t budget) const;

  SpeculationConfig config_;
  const DraftCosts& costs_;
  StepCostModel step_cost_;     // the target's decode and verify steps
  AcceptanceStats all_;         // every request's verifies: the prior each request's rate is shrunk towards
  DraftConfidence confidence_;  // how a draft model's confidences map to acceptance
};

}  // namespace exactly
