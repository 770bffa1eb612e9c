// Owned CUDA memory: allocated on construction, freed on destruction, moved
// but never copied. Allocation failures name what was being allocated and how
// much. DeviceBuffer holds GPU memory; PinnedBuffer page-locked host memory,
// for copies that overlap with the GPU's work.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "core/format.h"
#include "kernels/cuda/cuda_check.h"

namespace exactly::kernels::cuda {

struct GpuMemory {
  static cudaError_t allocate(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static void release(void* p) { cudaFree(p); }
  static constexpr const char* kWhere = "GPU memory";
};

struct PinnedHostMemory {
  static cudaError_t allocate(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
  static void release(void* p) { cudaFreeHost(p); }
  static constexpr const char* kWhere = "page-locked host memory";
};

template <class Memory>
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  OwnedBuffer(size_t bytes, const char* what) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t st = Memory::allocate(&ptr_, bytes);
    if (st != cudaSuccess) {
      ptr_ = nullptr;
      fail("cannot allocate %s of %s for %s: %s", human_bytes(static_cast<double>(bytes)).c_str(), Memory::kWhere,
           what, cudaGetErrorString(st));
    }
  }
  ~OwnedBuffer() {
    if (ptr_ != nullptr) Memory::release(ptr_);
  }
  OwnedBuffer(OwnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  OwnedBuffer& operator=(OwnedBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }

  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = OwnedBuffer<GpuMemory>;
using PinnedBuffer = OwnedBuffer<PinnedHostMemory>;

}  // namespace exactly::kernels::cuda
