// Matmul on Q4_1 weights: fused decode path and tiled GEMM (matmul_driver.h).
#include "kernels/cpu/matmul_driver.h"
#include "kernels/cpu/matmul_kernels.h"

namespace exactly::kernels::cpu {

#if EXACTLY_KERNELS_AVX2
void matmul_q4_1(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  run_matmul<DecodeQ4_1>(w, x, n_tokens, y, pool);
}
#endif

}  // namespace exactly::kernels::cpu
