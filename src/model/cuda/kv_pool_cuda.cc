#include "model/cuda/kv_pool_cuda.h"

#include "core/check.h"

namespace exactly {

namespace kc = kernels::cuda;

CudaKVPool::CudaKVPool(const ModelConfig& c, int64_t num_blocks, int block_size)
    : num_blocks_(num_blocks), block_size_(block_size), n_layers_(c.n_layers), n_kv_heads_(c.n_kv_heads),
      head_dim_(c.head_dim),
      layer_bytes_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size) * static_cast<size_t>(c.n_kv_heads) *
                   static_cast<size_t>(c.head_dim) * 2),
      pool_(layer_bytes_ * 2 * static_cast<size_t>(c.n_layers), "the KV cache"),
      layer_ptrs_(sizeof(void*) * 2 * static_cast<size_t>(c.n_layers), "the KV cache's layer table") {
  kc::check_cuda(cudaMemset(pool_.get(), 0, pool_.bytes()), "zeroing the KV cache");
  std::vector<void*> ptrs(2 * static_cast<size_t>(n_layers_));
  for (int l = 0; l < n_layers_; ++l) {
    ptrs[static_cast<size_t>(l)] = layer(l).k;
    ptrs[static_cast<size_t>(n_layers_ + l)] = layer(l).v;
  }
  kc::check_cuda(cudaMemcpy(layer_ptrs_.get(), ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice),
                 "the KV cache's layer table");
}

kc::PagedKVDevice CudaKVPool::layer(int index) const {
  auto* base = pool_.as<uint8_t>();
  return {base + layer_bytes_ * static_cast<size_t>(index), base + layer_bytes_ * static_cast<size_t>(n_layers_ + index),
          num_blocks_, block_size_, n_kv_heads_, head_dim_, kc::DType::bf16};
}

void CudaKVPool::copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& pairs) {
  if (pairs.empty()) return;
  std::vector<int64_t> flat;
  for (const auto& [src, dst] : pairs) {
    EXACTLY_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_, "bad block copy %d -> %d", src, dst);
    flat.push_back(src);
    flat.push_back(dst);
  }
  if (pairs.size() > pairs_capacity_) {
    pairs_capacity_ = std::max<size_t>(pairs.size(), 2 * pairs_capacity_);
    pairs_ = kc::DeviceBuffer(pairs_capacity_ * 2 * sizeof(int64_t), "block copy pairs");
  }
  // Synchronous: the copies are few and must land before the next pass,
  // which runs on the model's own stream.
  kc::check_cuda(cudaMemcpy(pairs_.get(), flat.data(), flat.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
                 "block copy pairs");
  auto* const* ptrs = layer_ptrs_.as<void*>();
  kc::copy_blocks(ptrs, ptrs + n_layers_, n_layers_, pairs_.as<int64_t>(), static_cast<int64_t>(pairs.size()),
                  block_size_, n_kv_heads_, head_dim_, kc::DType::bf16, nullptr);
  kc::check_cuda(cudaDeviceSynchronize(), "block copy");
}

}  // namespace exactly
