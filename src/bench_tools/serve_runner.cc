#include "bench_tools/serve_runner.h"

#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <semaphore>
#include <thread>

namespace exactly::bench_tools {

namespace {

// Bounds in-flight requests under open-loop arrivals; a request that waits
// here is timed from when it is actually sent, as a client would see it.
using InFlightLimit = std::counting_semaphore<1 << 20>;

LoadResult run_closed_loop(const Endpoint& endpoint, const std::vector<BenchRequest>& requests, int workers) {
  LoadResult r;
  r.outcomes.resize(requests.size());
  std::atomic<size_t> next{0};
  const BenchClock::time_point start = BenchClock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < workers && static_cast<size_t>(w) < requests.size(); ++w)
    threads.emplace_back([&] {
      StreamingClient client(endpoint);
      for (size_t i = next++; i < requests.size(); i = next++) r.outcomes[i] = client.send(requests[i].body, start);
    });
  for (std::thread& t : threads) t.join();
  r.duration_s = std::chrono::duration<double>(BenchClock::now() - start).count();
  return r;
}

LoadResult run_open_loop(const Endpoint& endpoint, const std::vector<BenchRequest>& requests, const LoadShape& shape) {
  LoadResult r;
  r.outcomes.resize(requests.size());
  const std::vector<double> arrivals = poisson_arrivals(requests.size(), shape.request_rate, shape.seed);
  std::unique_ptr<InFlightLimit> limit;
  if (shape.max_concurrency > 0) limit = std::make_unique<InFlightLimit>(shape.max_concurrency);
  const BenchClock::time_point start = BenchClock::now();
  std::vector<std::thread> threads;
  threads.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<BenchClock::duration>(
                                              std::chrono::duration<double>(arrivals[i])));
    // A thread (and client) per request: under open-loop arrivals a request
    // must not wait for an earlier one to free a worker.
    threads.emplace_back([&, i] {
      if (limit) limit->acquire();
      StreamingClient client(endpoint);
      r.outcomes[i] = client.send(requests[i].body, start);
      if (limit) limit->release();
    });
  }
  for (std::thread& t : threads) t.join();
  r.duration_s = std::chrono::duration<double>(BenchClock::now() - start).count();
  return r;
}

}  // namespace

std::vector<double> poisson_arrivals(size_t count, double rate, uint64_t seed) {
  std::vector<double> t(count, 0.0);
  if (std::isinf(rate)) return t;
  std::mt19937_64 rng(seed);
  double now = 0;
  for (size_t i = 1; i < count; ++i) {
    // Inverse-CDF sampling from 53 random bits, so the schedule is the same
    // on every standard library; 1 - u lies in (0, 1], so the log is finite.
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    now += -std::log(1.0 - u) / rate;
    t[i] = now;
  }
  return t;
}

LoadResult run_load(const Endpoint& endpoint, const std::vector<BenchRequest>& requests, const LoadShape& shape) {
  if (std::isinf(shape.request_rate) && shape.max_concurrency > 0)
    return run_closed_loop(endpoint, requests, shape.max_concurrency);
  return run_open_loop(endpoint, requests, shape);
}

}  // namespace exactly::bench_tools
