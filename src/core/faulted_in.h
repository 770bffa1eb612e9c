// Capacity that is already backed by memory. std::vector::reserve only maps
// pages; the first write to each then faults it in, which on a shared VM has
// cost 35-80 ms for a few vocabulary-sized buffers
// (docs/journal/benchmarks-record.md §4). Where that first write would land
// inside a timed step, write once up front.
#pragma once

#include <cstddef>
#include <vector>

namespace exactly {

// Leaves `v` empty with room for `n` elements whose pages are written.
template <typename T>
void reserve_faulted_in(std::vector<T>& v, size_t n) {
  v.assign(n, T{});
  v.clear();  // keeps the capacity
}

}  // namespace exactly
