// Turning CUDA status codes and bad arguments into exactly::Error, so that a
// failed launch is reported where it happened with the runtime's own words.
#pragma once

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdio>
#include <string>

#include "core/error.h"

namespace exactly::kernels::cuda {

[[noreturn]] inline void fail(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  throw Error(buf);
}

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) fail("%s: %s (%s)", what, cudaGetErrorString(status), cudaGetErrorName(status));
}

// After a launch: configuration errors surface here, execution errors at the
// next synchronising call.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

}  // namespace exactly::kernels::cuda

#define EXACTLY_CUDA_REQUIRE(cond, ...)                      \
  do {                                                       \
    if (!(cond)) ::exactly::kernels::cuda::fail(__VA_ARGS__); \
  } while (0)
