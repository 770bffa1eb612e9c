// kernels::matmul: shape checks and dispatch on the stored weight type.
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "kernels/cpu/matmul_fused.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/matmul_tiled.h"
#include "kernels/ops.h"

namespace exactly::kernels {

#if EXACTLY_KERNELS_AVX2
cpu::TiledScratch& cpu::tiled_scratch() {
  thread_local TiledScratch scratch;
  return scratch;
}

bool cpu::cpu_runs_avx512() {
  static const bool runs = [] {
    const char* env = std::getenv("EXACTLY_CPU_AVX512");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  }();
  return runs;
}
#endif

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  EXACTLY_CHECK(w.rows > 0 && w.cols > 0 && n_tokens >= 0, "bad matmul shape [%lld, %lld] x %lld tokens",
                static_cast<long long>(w.rows), static_cast<long long>(w.cols), static_cast<long long>(n_tokens));
  const int64_t block = ggml_traits(w.type).block_elems;
  // 32 keeps every decoded group whole; the K-quants need whole super-blocks.
  EXACTLY_CHECK(w.cols % 32 == 0 && w.cols % block == 0, "matmul: %lld columns of %s is not a multiple of %lld",
                static_cast<long long>(w.cols), ggml_type_name(w.type).data(),
                static_cast<long long>(block < 32 ? 32 : block));
  if (n_tokens == 0) return;
#if EXACTLY_KERNELS_AVX2
  switch (w.type) {
    case GGMLType::Q4_0: return cpu::matmul_q4_0(w, x, n_tokens, y, pool);
    case GGMLType::Q4_1: return cpu::matmul_q4_1(w, x, n_tokens, y, pool);
    case GGMLType::Q8_0: return cpu::matmul_q8_0(w, x, n_tokens, y, pool);
    case GGMLType::F32: return cpu::matmul_f32(w, x, n_tokens, y, pool);
    case GGMLType::F16: return cpu::matmul_f16(w, x, n_tokens, y, pool);
    case GGMLType::BF16: return cpu::matmul_bf16(w, x, n_tokens, y, pool);
    default: return cpu::matmul_generic(w, x, n_tokens, y, pool);
  }
#else
  (void)pool;
  reference::matmul(w, x, n_tokens, y);
#endif
}

}  // namespace exactly::kernels
