// Built without CUDA: the C interface says so instead of failing to link.
#include "core/error.h"
#include "kernels/capi/kernels_capi.h"
#include "kernels/capi/last_error.h"

extern "C" int exactly_has_cuda(void) { return 0; }

extern "C" int64_t exactly_cuda_sampling_workspace_bytes(int64_t, int) { return 0; }

extern "C" int exactly_cuda_sample_rows(float*, int64_t, int, const void*, const void*, int32_t*, void*, void*) {
  return exactly::capi::guarded([] { throw exactly::Error("exactly_cuda_sample_rows: built without CUDA"); });
}

extern "C" int64_t exactly_cuda_verify_workspace_bytes(int64_t, int) { return 0; }

extern "C" int exactly_cuda_verify_drafts(float*, int64_t, int, const void*, const void*, const void*, int,
                                          const int32_t*, const int32_t*, const void*, const double*, int32_t*,
                                          int32_t*, void*, void*) {
  return exactly::capi::guarded([] { throw exactly::Error("exactly_cuda_verify_drafts: built without CUDA"); });
}

extern "C" int exactly_cuda_flash_forward(const void*, const void*, const void*, int, const int32_t*, const int32_t*,
                                          int, int, int, int, int, int, float, int, void*, float*, void*) {
  return exactly::capi::guarded([] { throw exactly::Error("exactly_cuda_flash_forward: built without CUDA"); });
}

extern "C" int64_t exactly_cuda_flash_backward_workspace_bytes(int64_t, int) { return 0; }

extern "C" int exactly_cuda_flash_backward(const void*, const void*, const void*, const void*, const void*,
                                           const float*, int, const int32_t*, const int32_t*, int, int, int, int,
                                           int, int, float, int, void*, void*, void*, void*, int64_t, void*) {
  return exactly::capi::guarded([] { throw exactly::Error("exactly_cuda_flash_backward: built without CUDA"); });
}
