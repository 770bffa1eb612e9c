// The tensor data of the paged KV cache on the CPU: one pool of fixed-size
// blocks per layer. Which block belongs to which sequence is bookkeeping that
// lives elsewhere; the model only sees block tables and slot mappings.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/ops.h"
#include "model/config.h"
#include "model/model.h"

namespace exactly {

class KVStorage final : public KVPool {
 public:
  KVStorage(const ModelConfig& config, int64_t num_blocks, int block_size);

  kernels::PagedKV layer(int index);
  // Copies whole blocks (every layer, K and V), in order: copy-on-write
  // before a forward pass. pairs: [n, 2] (src, dst) block ids.
  void copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& pairs) override;
  int64_t num_blocks() const override { return num_blocks_; }
  int block_size() const override { return block_size_; }
  int64_t num_slots() const { return num_blocks_ * block_size_; }
  // Bytes of K+V per token slot over all layers.
  static int64_t bytes_per_slot(const ModelConfig& config);

 private:
  int64_t num_blocks_;
  int block_size_;
  int n_kv_heads_;
  int head_dim_;
  // Anonymous mappings populated by the kernel at creation (MAP_POPULATE):
  // the pool is really allocated up front, as its size promises, so memory
  // use does not creep up as blocks are first touched, and it is done in bulk
  // rather than by writing zeros from user space.
  struct Unmapper {
    size_t bytes = 0;
    void operator()(float* p) const;
  };
  using Buffer = std::unique_ptr<float[], Unmapper>;
  static Buffer map_zeroed(size_t floats);
  std::vector<Buffer> k_;  // per layer: [num_blocks, block_size, n_kv_heads, head_dim]
  std::vector<Buffer> v_;  // per layer: [num_blocks, block_size, n_kv_heads, head_dim]
};

}  // namespace exactly
