// The paged KV cache in GPU memory: per layer, K and V pools of
// [num_blocks, block_size, n_kv_heads, head_dim] bf16, zeroed at allocation
// (the Hopper prefill kernel reads whole 16-slot groups, masked, and 0 * NaN
// would be NaN).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_buffer.h"
#include "model/config.h"
#include "model/model.h"

namespace exactly {

class CudaKVPool final : public KVPool {
 public:
  CudaKVPool(const ModelConfig& config, int64_t num_blocks, int block_size);

  int64_t num_blocks() const override { return num_blocks_; }
  int block_size() const override { return block_size_; }
  void copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& pairs) override;

  kernels::cuda::PagedKVDevice layer(int index) const;
  int64_t bytes() const { return static_cast<int64_t>(pool_.bytes()); }

 private:
  int64_t num_blocks_;
  int block_size_;
  int n_layers_, n_kv_heads_, head_dim_;
  size_t layer_bytes_;  // of K (or V) of one layer
  kernels::cuda::DeviceBuffer pool_;         // K of every layer, then V of every layer
  kernels::cuda::DeviceBuffer layer_ptrs_;   // [2, n_layers] device pointers, for copy_blocks
  kernels::cuda::DeviceBuffer pairs_;        // [2 * capacity] int64 block pairs
  size_t pairs_capacity_ = 0;
};

}  // namespace exactly
