// The two decisions speculative sampling makes at one draft position
// (Leviathan et al. 2023; Chen et al. 2023): accept draft x, drawn from the
// draft distribution q, with probability min(1, p(x) / q(x)); after a rejection
// draw the replacement from normalize(max(0, p - q)). Together they emit x with
// probability min(p(x), q(x)) + (1 - sum_y min(p(y), q(y))) * residual(x) = p(x):
// the first emitted token follows the target p exactly, whatever q is.
//
// They are plain functions, reached through AcceptanceRule, so that the tests
// compute the exact output law from the very code the RejectionSampler runs.
#pragma once

#include <vector>

#include "speculative/distribution_view.h"

namespace exactly {

// min(1, p_x / q_x). A draft with q_x = 0 could not have been drawn from q, so
// it is never accepted (it gets 0).
double modified_rejection_accept_probability(double p_x, double q_x);

// Writes normalize(max(0, p - q)) into `out`, in p's own entry order, keeping
// only entries with positive mass. Its support lies inside p's, so the cost is
// one pass over p's entries (a sparse q is indexed once, not scanned per entry).
// When max(0, p - q) has no mass — which for normalised p and q means p == q,
// where a rejection has probability 0 — it falls back to p itself.
//
// One-hot q at x (an n-gram draft): acceptance is min(1, p(x)) = p(x) and the
// residual is p with x removed, renormalised: max(0, p(x) - 1) = 0 at x and
// p(y) - 0 elsewhere. No special case is needed and the rule stays exact.
void modified_rejection_residual(DistributionView p, DistributionView q,
                                 std::vector<WeightedToken>& out);  // out: [num_residual_entries]

struct AcceptanceRule {
  double (*accept_probability)(double p_x, double q_x);
  void (*residual)(DistributionView p, DistributionView q, std::vector<WeightedToken>& out);
};

inline constexpr AcceptanceRule kModifiedRejection = {&modified_rejection_accept_probability,
                                                      &modified_rejection_residual};

}  // namespace exactly
