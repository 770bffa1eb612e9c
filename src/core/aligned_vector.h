// std::vector with storage aligned to a cache line. The CPU kernels read
// activations in 32-byte vectors; from malloc's 16-byte alignment half of
// those loads can straddle two cache lines, and which half depended on where
// the heap happened to place each buffer, so the same forward pass ran at
// different speeds from one build or process to the next.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace exactly {

template <class T, std::size_t kAlign = 64>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U, kAlign>&) {}  // NOLINT: rebinding converts implicitly
  template <class U>
  struct rebind {
    using other = AlignedAllocator<U, kAlign>;
  };
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kAlign})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{kAlign}); }
  template <class U>
  bool operator==(const AlignedAllocator<U, kAlign>&) const { return true; }
};

template <class T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace exactly
