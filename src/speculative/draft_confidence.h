// How a draft model's confidence in its drafts maps to the target accepting
// them, pooled over every request's verified model drafts.
//
// A draft's confidence is its probability under the distribution it was
// drawn from (ModelDrafter: Drafts::confidence). A distilled draft's
// probabilities track the target's, but not exactly: the scale is the
// ratio of drafts accepted to the sum of the confidences of the drafts the
// target examined (those up to and including the first rejected one), so
// that scale x confidence estimates a draft's acceptance on average. Drafts
// after a rejection were never tested and count for nothing.
#pragma once

#include <cstdint>
#include <span>

namespace exactly {

class DraftConfidence {
 public:
  // `prior` drafts of pseudo-evidence at scale 1: a few verifies cannot set
  // the scale alone.
  explicit DraftConfidence(double prior = 8.0);

  // One verify of drafts with these confidences, of which the first
  // `num_accepted` were kept.
  void record(std::span<const double> confidence, int32_t num_accepted);

  // Accepted drafts per unit of examined confidence.
  double scale() const { return accepted_ / confidence_; }

 private:
  double accepted_;
  double confidence_;
};

}  // namespace exactly
