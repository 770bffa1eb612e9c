// The CPU training attention behind the C interface: the oracle the CUDA
// backward and the PyTorch op are checked against.
#include <stdexcept>
#include <string>

#include "core/thread_pool.h"
#include "kernels/capi/kernels_capi.h"
#include "kernels/capi/last_error.h"
#include "kernels/cpu/flash_train.h"

namespace {

constexpr int kMaxThreads = 1024;

exactly::kernels::cpu::train::VarlenShape varlen_shape(int n_seqs, const int32_t* cu_q, const int32_t* cu_k,
                                                       int n_heads, int n_kv_heads, int head_dim, int causal) {
  return {n_seqs, cu_q, cu_k, n_heads, n_kv_heads, head_dim, causal != 0};
}

int checked_threads(int n_threads) {
  if (n_threads < 1 || n_threads > kMaxThreads)
    throw std::invalid_argument("n_threads must be in [1, " + std::to_string(kMaxThreads) + "], got " +
                                std::to_string(n_threads));
  return n_threads;
}

}  // namespace

extern "C" int exactly_cpu_flash_forward(const float* q, const float* k, const float* v, int n_seqs,
                                         const int32_t* cu_q, const int32_t* cu_k, int n_heads, int n_kv_heads,
                                         int head_dim, float scale, int causal, float* out, float* lse,
                                         int n_threads) {
  return exactly::capi::guarded([&] {
    const auto shape = varlen_shape(n_seqs, cu_q, cu_k, n_heads, n_kv_heads, head_dim, causal);
    exactly::kernels::cpu::train::validate(shape);
    exactly::ThreadPool pool(checked_threads(n_threads));
    exactly::kernels::cpu::train::flash_forward(shape, scale, q, k, v, out, lse, pool);
  });
}

extern "C" int exactly_cpu_flash_backward(const float* q, const float* k, const float* v, const float* out,
                                          const float* d_out, const float* lse, int n_seqs, const int32_t* cu_q,
                                          const int32_t* cu_k, int n_heads, int n_kv_heads, int head_dim,
                                          float scale, int causal, float* dq, float* dk, float* dv,
                                          int n_threads) {
  return exactly::capi::guarded([&] {
    const auto shape = varlen_shape(n_seqs, cu_q, cu_k, n_heads, n_kv_heads, head_dim, causal);
    exactly::kernels::cpu::train::validate(shape);
    exactly::ThreadPool pool(checked_threads(n_threads));
    exactly::kernels::cpu::train::flash_backward(shape, scale, q, k, v, out, d_out, lse, {dq, dk, dv}, pool);
  });
}
