// A read-only view of one probability distribution over the vocabulary, in
// whichever form the caller already has it — a dense row of probabilities, the
// sparse candidate list Sampler::distribution returns, or a single token — so
// verifying drafts never forces a copy or a conversion of a vocabulary-sized row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "sample/sampler.h"

namespace exactly {

// One (token, probability) pair of a sparse distribution.
struct WeightedToken {
  int32_t id;
  double p;
};

class DistributionView {
 public:
  // Probabilities indexed by token id.
  static DistributionView dense(std::span<const float> probs);   // [vocab_size]
  static DistributionView dense(std::span<const double> probs);  // [vocab_size]
  // Ids are unique and in any order; ids not listed have probability 0.
  static DistributionView sparse(std::span<const TokenProb> entries);      // [num_entries]
  static DistributionView sparse(std::span<const WeightedToken> entries);  // [num_entries]
  // All mass on `id`: what a deterministic drafter (n-gram lookup) samples from.
  static DistributionView one_hot(int32_t id);

  // O(1) for dense and one-hot views, O(num_entries) for sparse ones.
  double prob(int32_t id) const;

  bool is_dense() const { return kind_ == Kind::kDenseFloat || kind_ == Kind::kDenseDouble; }
  bool is_sparse() const { return kind_ == Kind::kSparseTokenProb || kind_ == Kind::kSparseWeighted; }
  // Entries visited by for_each.
  size_t num_entries() const;

  // Calls f(id, p) for every entry in the view's own order: id order for dense
  // views, list order for sparse ones. Draws walk this order, so it is part of
  // what makes a seeded draw reproducible.
  template <class F>
  void for_each(F&& f) const {
    switch (kind_) {
      case Kind::kDenseFloat:
        for (size_t i = 0; i < size_; ++i) f(static_cast<int32_t>(i), static_cast<double>(dense_float_[i]));
        break;
      case Kind::kDenseDouble:
        for (size_t i = 0; i < size_; ++i) f(static_cast<int32_t>(i), dense_double_[i]);
        break;
      case Kind::kSparseTokenProb:
        for (size_t i = 0; i < size_; ++i) f(token_probs_[i].id, token_probs_[i].p);
        break;
      case Kind::kSparseWeighted:
        for (size_t i = 0; i < size_; ++i) f(weighted_[i].id, weighted_[i].p);
        break;
      case Kind::kOneHot:
        f(one_hot_id_, 1.0);
        break;
    }
  }

 private:
  enum class Kind { kDenseFloat, kDenseDouble, kSparseTokenProb, kSparseWeighted, kOneHot };
  Kind kind_ = Kind::kOneHot;
  size_t size_ = 0;
  const float* dense_float_ = nullptr;      // [size_] when kDenseFloat
  const double* dense_double_ = nullptr;    // [size_] when kDenseDouble
  const TokenProb* token_probs_ = nullptr;  // [size_] when kSparseTokenProb
  const WeightedToken* weighted_ = nullptr; // [size_] when kSparseWeighted
  int32_t one_hot_id_ = 0;
};

// Inverse-CDF draw with a uniform u in [0, 1), walking the view's own order.
// u is scaled by the view's total mass, so rows that sum to 1 only up to float
// rounding are still drawn from exactly as given; the last entry with positive
// mass absorbs the rounding of the running sum.
int32_t draw_from(DistributionView dist, double u);

}  // namespace exactly
