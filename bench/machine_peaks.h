// The ceilings a kernel is measured against, measured in the same run:
// fp32 FMA throughput and memory bandwidth.
#pragma once

#include "core/thread_pool.h"

namespace exactly::bench {

// Median seconds of `fn` over `repeats` runs (after one warm-up run).
template <class Fn>
double median_seconds(int repeats, Fn&& fn);

// GFLOP/s of independent 8-lane FMA chains on every thread of the pool.
double peak_fma_gflops(ThreadPool& pool);
// GB/s reading a buffer much larger than the last-level cache (sum of floats).
double read_bandwidth_gbs(ThreadPool& pool);
// GB/s of memcpy between two large buffers (bytes read + bytes written).
double copy_bandwidth_gbs(ThreadPool& pool);

}  // namespace exactly::bench

#include "machine_peaks_impl.h"
