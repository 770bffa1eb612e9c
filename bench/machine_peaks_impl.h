// Template definition of median_seconds (included by machine_peaks.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace exactly::bench {

template <class Fn>
double median_seconds(int repeats, Fn&& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace exactly::bench
