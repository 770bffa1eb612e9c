// The collective operations of tensor parallelism, as the ranks of one model
// call them: each rank holds a partial result and all must end with the sum.
// InProcessCollective stands where NCCL stands on GPUs: ranks are threads of
// one process and the sum runs in a fixed order (rank 0 + rank 1 + ...), so
// a row's bits depend on the number of ranks, never on timing or the batch.
#pragma once

#include <barrier>
#include <cstdint>
#include <vector>

namespace exactly {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int size() const = 0;
  // Every rank calls it with its own `data` of the same n floats; returns
  // when each holds the element-wise sum over the ranks, in rank order.
  virtual void all_reduce_sum(float* data, int64_t n, int rank) = 0;
};

class InProcessCollective final : public Collective {
 public:
  explicit InProcessCollective(int ranks);
  int size() const override { return static_cast<int>(buffers_.size()); }
  // Each rank sums its own share of the elements over all ranks' buffers and
  // writes that sum back into every buffer: no rank reads what another writes.
  void all_reduce_sum(float* data, int64_t n, int rank) override;

 private:
  std::vector<float*> buffers_;  // [ranks] the buffers of the reduce in progress
  std::barrier<> barrier_;
};

}  // namespace exactly
