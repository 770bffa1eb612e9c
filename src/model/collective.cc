#include "model/collective.h"

namespace exactly {

InProcessCollective::InProcessCollective(int ranks)
    : buffers_(static_cast<size_t>(ranks), nullptr), barrier_(ranks) {}

void InProcessCollective::all_reduce_sum(float* data, int64_t n, int rank) {
  const auto ranks = static_cast<int64_t>(buffers_.size());
  buffers_[static_cast<size_t>(rank)] = data;
  barrier_.arrive_and_wait();  // every rank's partial is in place
  const int64_t begin = n * rank / ranks, end = n * (rank + 1) / ranks;
  for (int64_t i = begin; i < end; ++i) {
    float sum = buffers_[0][i];
    for (int64_t r = 1; r < ranks; ++r) sum += buffers_[static_cast<size_t>(r)][i];
    for (int64_t r = 0; r < ranks; ++r) buffers_[static_cast<size_t>(r)][i] = sum;
  }
  barrier_.arrive_and_wait();  // every share is summed: the buffers may be reused
}

}  // namespace exactly
