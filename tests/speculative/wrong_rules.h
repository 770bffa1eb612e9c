// Deliberately wrong acceptance rules, to show the distribution tests can tell
// them from the real one. Test-only.
#pragma once

#include <vector>

#include "speculative/acceptance_rule.h"

namespace exactly::testing {

// "Accept whenever q(x) >= p(x)", taken literally: a deterministic accept.
inline double accept_when_draft_dominates(double p_x, double q_x) { return q_x >= p_x && q_x > 0 ? 1.0 : 0.0; }

// At rejection, resample from p itself instead of the residual.
inline void resample_from_target(DistributionView p, DistributionView, std::vector<WeightedToken>& out) {
  out.clear();
  p.for_each([&](int32_t id, double p_id) {
    if (p_id > 0) out.push_back({id, p_id});
  });
}

inline constexpr AcceptanceRule kWrongAcceptWhenDraftDominates = {&accept_when_draft_dominates,
                                                                  &modified_rejection_residual};
inline constexpr AcceptanceRule kWrongResampleFromTarget = {&modified_rejection_accept_probability,
                                                            &resample_from_target};

}  // namespace exactly::testing
