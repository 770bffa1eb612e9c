// Logit bias and grammar masks on the device (see sampling.h): one block per
// job. The biases are added by one thread in the job's order, so a token
// listed twice gets both, in the host's order; the mask is applied after.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling.h"

namespace exactly::kernels::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    process_kernel(float* logits, int64_t first_row, int64_t rows, int vocab, const ProcessRowJob* jobs,
                   const LogitBiasEntry* biases, const uint32_t* masks) {
  const ProcessRowJob job = jobs[blockIdx.x];
  const int64_t r = job.row - first_row;
  if (r < 0 || r >= rows) return;
  float* row = logits + r * vocab;
  if (threadIdx.x == 0)
    for (int32_t e = job.bias_begin; e < job.bias_end; ++e) row[biases[e].id] += biases[e].bias;
  if (job.mask < 0) return;
  __syncthreads();
  const uint32_t* mask = masks + static_cast<int64_t>(job.mask) * ((vocab + 31) / 32);
  for (int t = threadIdx.x; t < vocab; t += kThreads)
    if (((mask[t / 32] >> (t % 32)) & 1u) == 0) row[t] = -INFINITY;
}

}  // namespace

void process_rows(float* logits, int64_t first_row, int64_t rows, int32_t vocab, const ProcessRowJob* jobs,
                  int32_t num_jobs, const LogitBiasEntry* biases, const uint32_t* masks, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(num_jobs >= 0 && rows >= 0 && vocab >= 1, "process_rows: %d jobs, %lld rows, vocab %d", num_jobs,
                       static_cast<long long>(rows), vocab);
  if (num_jobs == 0 || rows == 0) return;
  EXACTLY_CUDA_REQUIRE(logits != nullptr && jobs != nullptr, "process_rows: null pointer (logits %p, jobs %p)",
                       static_cast<void*>(logits), static_cast<const void*>(jobs));
  process_kernel<<<static_cast<unsigned>(num_jobs), kThreads, 0, stream>>>(logits, first_row, rows, vocab, jobs, biases,
                                                                           masks);
  check_launch("process_rows");
}

}  // namespace exactly::kernels::cuda
