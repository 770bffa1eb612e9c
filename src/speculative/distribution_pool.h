// Storage for draft distributions, kept from one step to the next. Without
// top-k, a draft's processed q spans the vocabulary: 49,152 entries of 16
// bytes for SmolLM2, 786 KB. Allocated afresh for every draw and freed after
// the verify, each such q is 192 pages that the kernel must fault in and
// clear; measured in the engine at 1-20 ms a draw, against 0.5-1 ms to fill
// memory already touched, which made a probe of 64 drafts at temperature 0.8
// cost 0.65-0.9 s. Recycled, the storage of one step's distributions serves
// the next step's. The first step that drafts for many requests finds nothing
// to recycle, so the pool can be filled with memory faulted in up front.
#pragma once

#include <vector>

#include "sample/sampler.h"

namespace exactly {

class DistributionPool {
 public:
  // An empty vector, with the capacity of one given back earlier if any.
  std::vector<TokenProb> take();
  // Keeps the storage of every vector in `dists` for later take()s and
  // leaves `dists` empty.
  void give_back(std::vector<std::vector<TokenProb>>& dists);
  // Adds spare vectors until there are `n`, each with room for `entries`
  // whose pages are written now (core/faulted_in.h).
  void fill(size_t n, size_t entries);
  size_t spare() const { return spare_.size(); }

 private:
  std::vector<std::vector<TokenProb>> spare_;
};

}  // namespace exactly
