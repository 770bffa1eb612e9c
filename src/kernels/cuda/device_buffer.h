// Owned device memory: cudaMalloc'd on construction, freed on destruction.
// Allocation failures name what was being allocated and how much.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "core/format.h"
#include "kernels/cuda/cuda_check.h"

namespace exactly::kernels::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const char* what) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t st = cudaMalloc(&ptr_, bytes);
    if (st != cudaSuccess)
      fail("cannot allocate %s of GPU memory for %s: %s", human_bytes(static_cast<double>(bytes)).c_str(), what,
           cudaGetErrorString(st));
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
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

// Page-locked host memory, for copies that overlap with the GPU's work.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(size_t bytes, const char* what) : bytes_(bytes) {
    if (bytes == 0) return;
    check_cuda(cudaMallocHost(&ptr_, bytes), what);
  }
  ~PinnedBuffer() {
    if (ptr_ != nullptr) cudaFreeHost(ptr_);
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }

  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace exactly::kernels::cuda
