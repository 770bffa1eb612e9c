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

// Which kernels are launched as dependents: none, the few-row products only
// (whose weight reads can start early), or every kernel of the chain.
// EXACTLY_CUDA_PDL=0/1/2 (read once per process); none before compute
// capability 9.0. The default is every kernel: on an H100 it makes
// SmolLM2-135M's batch-1 decode 7% faster than the products alone, in either
// order of the products, and Llama-3-8B's within 1% either way
// (docs/journal/benchmarks-record.md §6).
enum class DependentLaunch { kOff = 0, kProducts = 1, kAll = 2 };
DependentLaunch dependent_launch_mode();

enum class LaunchRole { kProduct, kOther };

template <typename... Params, typename... Args>
void launch_dependent(const char* name, LaunchRole role, void (*kernel)(Params...), dim3 grid, dim3 block,
                      size_t shared_bytes, cudaStream_t stream, Args... args) {
  const DependentLaunch mode = dependent_launch_mode();
  const bool dependent =
      mode == DependentLaunch::kAll || (mode == DependentLaunch::kProducts && role == LaunchRole::kProduct);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  check_cuda(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...), name);
}

}  // namespace exactly::kernels::cuda
