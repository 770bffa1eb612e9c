// The clock the in-process benchmarks time with, and the medians they report
// over repetitions.
#pragma once

#include <chrono>
#include <vector>

namespace exactly::bench_tools {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

inline double ms_between(Clock::time_point start, Clock::time_point end) { return 1e3 * seconds_between(start, end); }

// The middle value; the mean of the two middle values for an even count; 0
// for none.
double median(std::vector<double> v);

// The value at index n / 2 of the sorted values (the upper of the two middle
// ones for an even count); 0 for none.
double upper_median(std::vector<double> v);

}  // namespace exactly::bench_tools
