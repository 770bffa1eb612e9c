#include "kernels/cuda/dependent_launch.h"

#include <cstdlib>
#include <cstring>

namespace exactly::kernels::cuda {

bool dependent_launch_enabled() {
  static const bool enabled = [] {
    if (const char* env = std::getenv("EXACTLY_CUDA_PDL"); env != nullptr && std::strcmp(env, "0") == 0) return false;
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
    return major >= 9;
  }();
  return enabled;
}

}  // namespace exactly::kernels::cuda
