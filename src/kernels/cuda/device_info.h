// Facts of the current GPU that launchers size their grids and pick their
// kernels by, read once per process.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace exactly::kernels::cuda {

inline int device_attribute(cudaDeviceAttr attribute, const char* what) {
  int device = 0, value = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&value, attribute, device), what);
  return value;
}

inline int device_multiprocessors() {
  static const int count = device_attribute(cudaDevAttrMultiProcessorCount, "multiprocessor count");
  return count;
}

// 9 on Hopper, whose sm_90a kernels (wgmma, clusters) exist nowhere else.
inline int device_compute_major() {
  static const int major = device_attribute(cudaDevAttrComputeCapabilityMajor, "compute capability");
  return major;
}

}  // namespace exactly::kernels::cuda
