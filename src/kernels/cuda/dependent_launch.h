// Programmatic dependent launch (Hopper and later). A decode step is a chain
// of short kernels, each of which would otherwise pay its launch and ramp-up
// after the previous one has fully drained. Launched this way, a kernel's
// blocks may start while its predecessor's last blocks still run: they do
// whatever does not depend on it (a product streams its first weights) and
// then wait for it to complete, with its memory visible, before reading its
// outputs or writing anything.
//
// Rule for every kernel launched through launch_dependent(): call
// release_dependents() and wait_for_predecessor() before touching any memory
// that another kernel writes. Both are no-ops when the launch is a plain one
// (older GPUs, or EXACTLY_CUDA_PDL=0), so the kernels stay correct either way.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace exactly::kernels::cuda {

__device__ __forceinline__ void wait_for_predecessor() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel in the stream be scheduled; it still waits for this
// one to finish before it reads anything this one writes.
__device__ __forceinline__ void release_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// True on compute capability 9.0 and later unless EXACTLY_CUDA_PDL=0 (read
// once per process).
bool dependent_launch_enabled();

template <typename... Params, typename... Args>
void launch_dependent(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                      cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = dependent_launch_enabled() ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...), name);
}

}  // namespace exactly::kernels::cuda
