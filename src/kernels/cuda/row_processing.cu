// Logit bias and grammar masks on the device (see sampling.h). A job's row is
// cut into chunks of kChunkWords mask words (32 tokens each), a block per
// (chunk, job), so a row's vocabulary is spread over many SMs instead of
// walked by one block, whose loads would run one after another. Within a
// chunk, thread 0 adds the biases of the chunk's tokens in the job's order
// (a token listed twice gets both), then the mask is applied: a warp per 32
// words, each lane loading one word, then for each word in turn every lane
// masking one of its 32 tokens, so a warp's stores are 32 adjacent floats.
// The result is the host's process_row, value for value: biases before the
// mask, and a masked token -inf whatever its bias.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling.h"

namespace exactly::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kChunkWords = kThreads;  // a word a thread: 8,192 tokens a block

__device__ __forceinline__ void add_chunk_biases(float* row, const ProcessRowJob& job, const LogitBiasEntry* biases,
                                                 int t0, int t1) {
  for (int32_t e = job.bias_begin; e < job.bias_end; ++e)
    if (biases[e].id >= t0 && biases[e].id < t1) row[biases[e].id] += biases[e].bias;
}

__device__ __forceinline__ void mask_chunk(float* row, const uint32_t* mask, int vocab, int words, int word0) {
  const int lane = threadIdx.x % 32, warp_word0 = word0 + (threadIdx.x / 32) * 32;
  const int w = warp_word0 + lane;
  const uint32_t mine = w < words ? mask[w] : ~0u;
  for (int j = 0; j < 32 && warp_word0 + j < words; ++j) {
    const uint32_t word = __shfl_sync(0xffffffffu, mine, j);
    const int token = (warp_word0 + j) * 32 + lane;
    if (((word >> lane) & 1u) == 0 && token < vocab) row[token] = -INFINITY;
  }
}

__global__ void __launch_bounds__(kThreads)
    process_kernel(float* logits, int64_t first_row, int64_t rows, int vocab, const ProcessRowJob* jobs,
                   const LogitBiasEntry* biases, const uint32_t* masks) {
  const ProcessRowJob job = jobs[blockIdx.y];
  const int64_t r = job.row - first_row;
  if (r < 0 || r >= rows) return;
  float* row = logits + r * vocab;
  const int words = (vocab + 31) / 32, word0 = blockIdx.x * kChunkWords;
  const int t0 = word0 * 32, t1 = min(vocab, (word0 + kChunkWords) * 32);
  if (threadIdx.x == 0) add_chunk_biases(row, job, biases, t0, t1);
  if (job.mask < 0) return;
  __syncthreads();  // the chunk's biases land before its mask
  mask_chunk(row, masks + static_cast<int64_t>(job.mask) * words, vocab, words, word0);
}

}  // namespace

void process_rows(float* logits, int64_t first_row, int64_t rows, int32_t vocab, const ProcessRowJob* jobs,
                  int32_t num_jobs, const LogitBiasEntry* biases, const uint32_t* masks, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(num_jobs >= 0 && num_jobs <= 65535 && rows >= 0 && vocab >= 1,
                       "process_rows: %d jobs (at most 65535), %lld rows, vocab %d", num_jobs,
                       static_cast<long long>(rows), vocab);
  if (num_jobs == 0 || rows == 0) return;
  EXACTLY_CUDA_REQUIRE(logits != nullptr && jobs != nullptr, "process_rows: null pointer (logits %p, jobs %p)",
                       static_cast<void*>(logits), static_cast<const void*>(jobs));
  const int words = (vocab + 31) / 32;
  const dim3 grid(static_cast<unsigned>((words + kChunkWords - 1) / kChunkWords), static_cast<unsigned>(num_jobs));
  process_kernel<<<grid, kThreads, 0, stream>>>(logits, first_row, rows, vocab, jobs, biases, masks);
  check_launch("process_rows");
}

}  // namespace exactly::kernels::cuda
