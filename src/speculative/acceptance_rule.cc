#include "speculative/acceptance_rule.h"

#include <algorithm>

#include "core/check.h"

namespace exactly {

namespace {

// q(id) for every entry of p. A sparse q is sorted by id once so that a large
// candidate list (top-k disabled) costs O(n log n) rather than O(n^2).
class DraftProbLookup {
 public:
  explicit DraftProbLookup(DistributionView q) : q_(q) {
    if (!q.is_sparse() || q.num_entries() <= kLinearScanLimit) return;
    sorted_.reserve(q.num_entries());
    q.for_each([&](int32_t id, double p) { sorted_.push_back({id, p}); });
    std::sort(sorted_.begin(), sorted_.end(), [](const WeightedToken& a, const WeightedToken& b) { return a.id < b.id; });
  }

  double operator()(int32_t id) const {
    if (sorted_.empty()) return q_.prob(id);
    auto it = std::lower_bound(sorted_.begin(), sorted_.end(), id,
                               [](const WeightedToken& e, int32_t key) { return e.id < key; });
    return it != sorted_.end() && it->id == id ? it->p : 0.0;
  }

 private:
  static constexpr size_t kLinearScanLimit = 64;
  DistributionView q_;
  std::vector<WeightedToken> sorted_;  // [num_entries of q] by increasing id; empty when q is looked up directly
};

void normalise(std::vector<WeightedToken>& entries, double mass) {
  for (auto& e : entries) e.p /= mass;
}

}  // namespace

double modified_rejection_accept_probability(double p_x, double q_x) {
  if (!(q_x > 0)) return 0.0;
  return p_x >= q_x ? 1.0 : p_x / q_x;
}

void modified_rejection_residual(DistributionView p, DistributionView q, std::vector<WeightedToken>& out) {
  out.clear();
  const DraftProbLookup q_of(q);
  double mass = 0;
  p.for_each([&](int32_t id, double p_id) {
    if (!(p_id > 0)) return;
    const double excess = p_id - q_of(id);
    if (excess > 0) {
      out.push_back({id, excess});
      mass += excess;
    }
  });
  if (mass > 0) {
    normalise(out, mass);
    return;
  }
  out.clear();
  p.for_each([&](int32_t id, double p_id) {
    if (p_id > 0) {
      out.push_back({id, p_id});
      mass += p_id;
    }
  });
  EXACTLY_CHECK(mass > 0, "target distribution with no mass");
  normalise(out, mass);
}

}  // namespace exactly
