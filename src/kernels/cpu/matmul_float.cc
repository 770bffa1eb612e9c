// Matmul on unquantised weights (F32, F16, BF16): same kernels as the
// quantised types, with a widening "decode".
#include "kernels/cpu/matmul_driver.h"
#include "kernels/cpu/matmul_kernels.h"

namespace exactly::kernels::cpu {

#if EXACTLY_KERNELS_AVX2
void matmul_f32(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  run_matmul<DecodeF32>(w, x, n_tokens, y, pool);
}
void matmul_f16(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  run_matmul<DecodeF16>(w, x, n_tokens, y, pool);
}
void matmul_bf16(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  run_matmul<DecodeBF16>(w, x, n_tokens, y, pool);
}
#endif

}  // namespace exactly::kernels::cpu
