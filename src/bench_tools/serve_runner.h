// Sends a list of requests with a given arrival pattern and collects their
// timed outcomes:
//   open loop    Poisson arrivals at `request_rate` requests/s (exponential
//                gaps from a seeded generator; infinity sends all at once),
//                optionally capped at `max_concurrency` in flight;
//   closed loop  `max_concurrency` workers, each sending its next request
//                when its previous one finishes (rate infinite).
#pragma once

#include <cstdint>
#include <vector>

#include "bench_tools/serve_client.h"
#include "bench_tools/serve_workload.h"

namespace exactly::bench_tools {

struct LoadShape {
  double request_rate = 0;  // requests/s; +infinity: no pacing
  int max_concurrency = 0;  // 0: unbounded
  uint64_t seed = 0;        // arrival gaps
};

struct LoadResult {
  std::vector<RequestOutcome> outcomes;  // [requests], in input order
  double duration_s = 0;                 // from the first send to the last completion
};

LoadResult run_load(const Endpoint& endpoint, const std::vector<BenchRequest>& requests, const LoadShape& shape);

// Send times in seconds from the start: 0 for the first request, then
// exponential gaps of mean 1/rate; all 0 for an infinite rate.
std::vector<double> poisson_arrivals(size_t count, double rate, uint64_t seed);

}  // namespace exactly::bench_tools
