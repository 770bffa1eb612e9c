// KV store: each token's K and V rows ([n_kv_heads, head_dim], contiguous in
// both the input and the slot) copied as 16-byte vectors. Bit-exact by
// construction: nothing is converted.
#include "kernels/cuda/attention.h"
#include "kernels/cuda/launch_common.h"

namespace exactly::kernels::cuda {
namespace {

__global__ void kv_store_kernel(uint4* k_cache, uint4* v_cache, const uint4* k, const uint4* v,
                                const int64_t* slot_mapping, int vectors_per_row) {
  const int64_t token = blockIdx.x;
  const int64_t slot = slot_mapping[token];
  if (slot < 0) return;
  for (int i = threadIdx.x; i < vectors_per_row; i += blockDim.x) {
    k_cache[slot * vectors_per_row + i] = k[token * vectors_per_row + i];
    v_cache[slot * vectors_per_row + i] = v[token * vectors_per_row + i];
  }
}

}  // namespace

void kv_store(const PagedKVDevice& cache, const void* k, const void* v, const int64_t* slot_mapping,
              int64_t n_tokens, cudaStream_t stream) {
  check_cache(cache, "kv_store");
  EXACTLY_CUDA_REQUIRE(aligned16(k) && aligned16(v), "kv_store: k/v pointers are not 16-byte aligned");
  EXACTLY_CUDA_REQUIRE(n_tokens >= 0 && n_tokens <= 0x7fffffff, "kv_store: %lld tokens", (long long)n_tokens);
  if (n_tokens == 0) return;
  const int vectors_per_row = cache.n_kv_heads * cache.head_dim * 2 / 16;
  kv_store_kernel<<<static_cast<unsigned>(n_tokens), 128, 0, stream>>>(
      static_cast<uint4*>(cache.k), static_cast<uint4*>(cache.v), static_cast<const uint4*>(k),
      static_cast<const uint4*>(v), slot_mapping, vectors_per_row);
  check_launch("kv_store");
}

}  // namespace exactly::kernels::cuda
