#include "kernels/cuda/dependent_launch.h"

#include <cstdlib>
#include <cstring>

namespace exactly::kernels::cuda {

DependentLaunch dependent_launch_mode() {
  static const DependentLaunch mode = [] {
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return DependentLaunch::kOff;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9)
      return DependentLaunch::kOff;
    const char* env = std::getenv("EXACTLY_CUDA_PDL");
    // The default as measured: docs/journal/benchmarks-record.md §6.
    if (env == nullptr) return DependentLaunch::kAll;
    if (std::strcmp(env, "0") == 0) return DependentLaunch::kOff;
    if (std::strcmp(env, "1") == 0) return DependentLaunch::kProducts;
    return DependentLaunch::kAll;
  }();
  return mode;
}

}  // namespace exactly::kernels::cuda
