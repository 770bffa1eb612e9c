#include "speculative/distribution_view.h"

#include "core/check.h"

namespace exactly {

DistributionView DistributionView::dense(std::span<const float> probs) {
  DistributionView v;
  v.kind_ = Kind::kDenseFloat;
  v.size_ = probs.size();
  v.dense_float_ = probs.data();
  return v;
}

DistributionView DistributionView::dense(std::span<const double> probs) {
  DistributionView v;
  v.kind_ = Kind::kDenseDouble;
  v.size_ = probs.size();
  v.dense_double_ = probs.data();
  return v;
}

DistributionView DistributionView::sparse(std::span<const TokenProb> entries) {
  DistributionView v;
  v.kind_ = Kind::kSparseTokenProb;
  v.size_ = entries.size();
  v.token_probs_ = entries.data();
  return v;
}

DistributionView DistributionView::sparse(std::span<const WeightedToken> entries) {
  DistributionView v;
  v.kind_ = Kind::kSparseWeighted;
  v.size_ = entries.size();
  v.weighted_ = entries.data();
  return v;
}

DistributionView DistributionView::one_hot(int32_t id) {
  EXACTLY_CHECK(id >= 0, "token id %d", id);
  DistributionView v;
  v.kind_ = Kind::kOneHot;
  v.size_ = 1;
  v.one_hot_id_ = id;
  return v;
}

size_t DistributionView::num_entries() const { return size_; }

double DistributionView::prob(int32_t id) const {
  if (id < 0) return 0.0;
  const size_t i = static_cast<size_t>(id);
  switch (kind_) {
    case Kind::kDenseFloat:
      return i < size_ ? static_cast<double>(dense_float_[i]) : 0.0;
    case Kind::kDenseDouble:
      return i < size_ ? dense_double_[i] : 0.0;
    case Kind::kSparseTokenProb:
      for (size_t j = 0; j < size_; ++j)
        if (token_probs_[j].id == id) return token_probs_[j].p;
      return 0.0;
    case Kind::kSparseWeighted:
      for (size_t j = 0; j < size_; ++j)
        if (weighted_[j].id == id) return weighted_[j].p;
      return 0.0;
    case Kind::kOneHot:
      return id == one_hot_id_ ? 1.0 : 0.0;
  }
  return 0.0;
}

int32_t draw_from(DistributionView dist, double u) {
  double total = 0;
  int32_t last_positive = -1;
  dist.for_each([&](int32_t id, double p) {
    if (p > 0) {
      total += p;
      last_positive = id;
    }
  });
  EXACTLY_CHECK(last_positive >= 0, "drawing from a distribution with no mass");
  double remaining = u * total;
  int32_t chosen = -1;
  dist.for_each([&](int32_t id, double p) {
    if (chosen >= 0 || p <= 0) return;
    if (remaining < p) chosen = id;
    remaining -= p;
  });
  return chosen >= 0 ? chosen : last_positive;
}

}  // namespace exactly
