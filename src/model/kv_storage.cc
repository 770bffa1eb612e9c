#include "model/kv_storage.h"

namespace exactly {

KVStorage::KVStorage(const ModelConfig& config, int64_t num_blocks, int block_size)
    : num_blocks_(num_blocks), block_size_(block_size), n_kv_heads_(config.n_kv_heads),
      head_dim_(config.head_dim) {
  const size_t per_layer = static_cast<size_t>(num_blocks * block_size * n_kv_heads_ * head_dim_);
  k_.assign(static_cast<size_t>(config.n_layers), std::vector<float>(per_layer));
  v_.assign(static_cast<size_t>(config.n_layers), std::vector<float>(per_layer));
}

kernels::PagedKV KVStorage::layer(int index) {
  auto i = static_cast<size_t>(index);
  return {k_[i].data(), v_[i].data(), num_blocks_, block_size_, n_kv_heads_, head_dim_};
}

int64_t KVStorage::bytes_per_slot(const ModelConfig& config) {
  return int64_t{2} * config.n_layers * config.n_kv_heads * config.head_dim * int64_t{sizeof(float)};
}

}  // namespace exactly
