#include "model/kv_storage.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"

namespace exactly {

KVStorage::KVStorage(const ModelConfig& config, int64_t num_blocks, int block_size)
    : num_blocks_(num_blocks), block_size_(block_size), n_kv_heads_(config.n_kv_heads),
      head_dim_(config.head_dim) {
  const size_t per_layer = static_cast<size_t>(num_blocks * block_size * n_kv_heads_ * head_dim_);
  for (int l = 0; l < config.n_layers; ++l) {
    k_.push_back(map_zeroed(per_layer));
    v_.push_back(map_zeroed(per_layer));
  }
}

void KVStorage::Unmapper::operator()(float* p) const {
  if (p != nullptr) munmap(p, bytes);
}

KVStorage::Buffer KVStorage::map_zeroed(size_t floats) {
  const size_t bytes = std::max<size_t>(1, floats * sizeof(float));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED)
    throw Error(strformat("cannot allocate %s for the KV cache: %s", human_bytes(static_cast<double>(bytes)).c_str(),
                          std::strerror(errno)));
  return Buffer(static_cast<float*>(p), Unmapper{bytes});
}

kernels::PagedKV KVStorage::layer(int index) {
  auto i = static_cast<size_t>(index);
  return {k_[i].get(), v_[i].get(), num_blocks_, block_size_, n_kv_heads_, head_dim_};
}

void KVStorage::copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& pairs) {
  const size_t block_floats = static_cast<size_t>(block_size_) * static_cast<size_t>(n_kv_heads_ * head_dim_);
  for (const auto& [src, dst] : pairs) {
    EXACTLY_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_, "bad block copy %d -> %d", src, dst);
    for (size_t l = 0; l < k_.size(); ++l) {
      std::memcpy(k_[l].get() + static_cast<size_t>(dst) * block_floats, k_[l].get() + static_cast<size_t>(src) * block_floats,
                  block_floats * sizeof(float));
      std::memcpy(v_[l].get() + static_cast<size_t>(dst) * block_floats, v_[l].get() + static_cast<size_t>(src) * block_floats,
                  block_floats * sizeof(float));
    }
  }
}

int64_t KVStorage::bytes_per_slot(const ModelConfig& config) {
  return int64_t{2} * config.n_layers * config.n_kv_heads * config.head_dim * int64_t{sizeof(float)};
}

}  // namespace exactly
