// Sampling (see sampling.h): the kernel that processes and draws one row per
// block; the passes it makes are in sampling_device.cuh, shared with the
// verification of drafts (spec_verify.cu).
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling.h"
#include "kernels/cuda/sampling_device.cuh"

namespace exactly::kernels::cuda {

// The C interface and the Python checks build these arrays byte for byte.
static_assert(sizeof(SampleRowParams) == 48 && offsetof(SampleRowParams, penalty_end) == 32 &&
                  offsetof(SampleRowParams, uniform) == 40,
              "SampleRowParams layout");
static_assert(sizeof(PenaltyEntry) == 12 && alignof(PenaltyEntry) == 4, "PenaltyEntry layout");

namespace {

using namespace sampling_device;

__global__ void __launch_bounds__(kThreads)
    sample_kernel(float* logits, int vocab, const SampleRowParams* params, const PenaltyEntry* penalties,
                  int32_t* tokens, u64* workspace) {
  __shared__ Shared s;
  const int64_t r = blockIdx.x;
  const SampleRowParams p = params[r];
  process_row(s, logits + r * vocab, vocab, p, penalties, workspace + r * vocab, [&](const ProcessedRow& row) {
    const int token = draw_row(s, row, workspace + r * vocab, p.uniform);
    if (threadIdx.x == 0) tokens[r] = token;
  });
}

bool aligned(const void* p, size_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

}  // namespace

size_t sampling_workspace_bytes(int64_t rows, int32_t vocab) {
  if (rows <= 0 || vocab <= 0) return 0;
  return static_cast<size_t>(rows) * static_cast<size_t>(vocab) * sizeof(u64);
}

void sample_rows(float* logits, int64_t rows, int32_t vocab, const SampleRowParams* params,
                 const PenaltyEntry* penalties, int32_t* tokens, void* workspace, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(rows >= 0 && rows <= INT32_MAX, "sample_rows: %lld rows (0 to %d)",
                       static_cast<long long>(rows), INT32_MAX);
  EXACTLY_CUDA_REQUIRE(vocab >= 1 && vocab <= kSamplingMaxVocab, "sample_rows: vocab %d (1 to %d)", vocab,
                       kSamplingMaxVocab);
  if (rows == 0) return;
  EXACTLY_CUDA_REQUIRE(logits != nullptr && params != nullptr && tokens != nullptr && workspace != nullptr,
                       "sample_rows: null pointer (logits %p, params %p, tokens %p, workspace %p)",
                       static_cast<void*>(logits), static_cast<const void*>(params), static_cast<void*>(tokens),
                       workspace);
  EXACTLY_CUDA_REQUIRE(aligned(logits, alignof(float)) && aligned(params, alignof(SampleRowParams)) &&
                           aligned(penalties, alignof(PenaltyEntry)) && aligned(tokens, alignof(int32_t)) &&
                           aligned(workspace, alignof(u64)),
                       "sample_rows: misaligned pointer (logits %p, params %p, penalties %p, tokens %p, "
                       "workspace %p)",
                       static_cast<void*>(logits), static_cast<const void*>(params),
                       static_cast<const void*>(penalties), static_cast<void*>(tokens), workspace);
  sample_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, params, penalties, tokens,
                                                                     static_cast<u64*>(workspace));
  check_launch("sample_rows");
}

}  // namespace exactly::kernels::cuda
