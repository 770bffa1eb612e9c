#include "speculative/distribution_pool.h"

#include <utility>

#include "core/faulted_in.h"

namespace exactly {

std::vector<TokenProb> DistributionPool::take() {
  if (spare_.empty()) return {};
  std::vector<TokenProb> v = std::move(spare_.back());
  spare_.pop_back();
  v.clear();
  return v;
}

void DistributionPool::fill(size_t n, size_t entries) {
  while (spare_.size() < n) {
    spare_.emplace_back();
    reserve_faulted_in(spare_.back(), entries);
  }
}

void DistributionPool::give_back(std::vector<std::vector<TokenProb>>& dists) {
  for (std::vector<TokenProb>& d : dists)
    if (d.capacity() > 0) spare_.push_back(std::move(d));
  dists.clear();
}

}  // namespace exactly
