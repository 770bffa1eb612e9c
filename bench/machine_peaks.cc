#include "machine_peaks.h"

#include <immintrin.h>

#include <cstring>
#include <vector>

namespace exactly::bench {

namespace {
volatile float g_sink;
constexpr int64_t kBigBytes = int64_t{256} << 20;  // well past the 32 MiB L3
}  // namespace

double peak_fma_gflops(ThreadPool& pool) {
  constexpr int64_t kIters = 20'000'000;
  constexpr int kChains = 12;  // FMA latency x throughput on current x86 cores
  auto body = [](int) {
    __m256 acc[kChains];
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < kIters; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    float out[8];
    __m256 s = acc[0];
    for (int c = 1; c < kChains; ++c) s = _mm256_add_ps(s, acc[c]);
    _mm256_storeu_ps(out, s);
    g_sink = out[0];
  };
  const double sec = median_seconds(3, [&] { pool.run_on_all(body); });
  return 2.0 * 8 * kChains * static_cast<double>(kIters) * pool.size() / sec * 1e-9;
}

double read_bandwidth_gbs(ThreadPool& pool) {
  const int64_t n = kBigBytes / 4;
  std::vector<float> buf(static_cast<size_t>(n), 1.0f);
  const double sec = median_seconds(5, [&] {
    pool.parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
      __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
      for (int64_t i = b; i < e; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(&buf[static_cast<size_t>(i)]));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(&buf[static_cast<size_t>(i + 8)]));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(&buf[static_cast<size_t>(i + 16)]));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(&buf[static_cast<size_t>(i + 24)]));
      }
      float out[8];
      _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
      g_sink = out[0];
    });
  });
  return static_cast<double>(kBigBytes) / sec * 1e-9;
}

double copy_bandwidth_gbs(ThreadPool& pool) {
  std::vector<char> src(static_cast<size_t>(kBigBytes), 1), dst(static_cast<size_t>(kBigBytes), 0);
  const double sec = median_seconds(5, [&] {
    pool.parallel_for(kBigBytes, 1 << 20, [&](int64_t b, int64_t e) {
      std::memcpy(dst.data() + b, src.data() + b, static_cast<size_t>(e - b));
    });
  });
  return 2.0 * static_cast<double>(kBigBytes) / sec * 1e-9;
}

}  // namespace exactly::bench
