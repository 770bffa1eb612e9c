// Batched block copy for copy-on-write: every (src, dst) pair of every layer
// in one launch, before the step's forward pass reads the copies.
#include "kernels/cuda/attention.h"
#include "kernels/cuda/launch_common.h"

namespace exactly::kernels::cuda {
namespace {

__global__ void copy_blocks_kernel(void* const* layer_k, void* const* layer_v, const int64_t* pairs,
                                   int64_t vectors_per_block) {
  const int64_t pair = blockIdx.x;
  const int layer = blockIdx.y;
  const int64_t src = pairs[2 * pair] * vectors_per_block;
  const int64_t dst = pairs[2 * pair + 1] * vectors_per_block;
  uint4* k = static_cast<uint4*>(layer_k[layer]);
  uint4* v = static_cast<uint4*>(layer_v[layer]);
  for (int64_t i = threadIdx.x; i < vectors_per_block; i += blockDim.x) {
    k[dst + i] = k[src + i];
    v[dst + i] = v[src + i];
  }
}

}  // namespace

void copy_blocks(void* const* layer_k, void* const* layer_v, int n_layers, const int64_t* pairs, int64_t n_pairs,
                 int block_size, int n_kv_heads, int head_dim, DType dtype, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(block_size > 0 && n_kv_heads > 0 && (head_dim == 64 || head_dim == 128),
                       "copy_blocks: block of %d x %d x %d", block_size, n_kv_heads, head_dim);
  (void)dtype;  // a bit copy: the element type only fixes the size
  EXACTLY_CUDA_REQUIRE(n_layers > 0 && n_layers <= 65535, "copy_blocks: %d layers", n_layers);
  EXACTLY_CUDA_REQUIRE(n_pairs >= 0 && n_pairs <= 0x7fffffff, "copy_blocks: %lld pairs", (long long)n_pairs);
  if (n_pairs == 0) return;
  const int64_t vectors = int64_t{block_size} * n_kv_heads * head_dim * 2 / 16;
  copy_blocks_kernel<<<dim3(static_cast<unsigned>(n_pairs), n_layers), 256, 0, stream>>>(layer_k, layer_v, pairs,
                                                                                         vectors);
  check_launch("copy_blocks");
}

}  // namespace exactly::kernels::cuda
