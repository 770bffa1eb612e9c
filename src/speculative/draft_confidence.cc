#include "speculative/draft_confidence.h"

#include <algorithm>

#include "core/check.h"

namespace exactly {

DraftConfidence::DraftConfidence(double prior) : accepted_(prior), confidence_(prior) {
  EXACTLY_CHECK(prior > 0, "prior %g", prior);
}

void DraftConfidence::record(std::span<const double> confidence, int32_t num_accepted) {
  EXACTLY_CHECK(num_accepted >= 0 && static_cast<size_t>(num_accepted) <= confidence.size(), "accepted %d of %zu",
                num_accepted, confidence.size());
  const size_t examined = std::min(confidence.size(), static_cast<size_t>(num_accepted) + 1);
  for (size_t i = 0; i < examined; ++i) confidence_ += std::clamp(confidence[i], 0.0, 1.0);
  accepted_ += num_accepted;
}

}  // namespace exactly
