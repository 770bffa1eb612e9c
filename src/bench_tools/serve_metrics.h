// The serving figures, kept apart as a client sees them: throughput (requests
// and tokens per second over the whole run) and latency distributions per
// request (time to first token, time per output token, inter-token latency,
// end-to-end), plus goodput: requests per second that met every given SLO.
//
// Definitions, per completed request with n output tokens:
//   TTFT = first text chunk - send;   E2EL = end of stream - send;
//   TPOT = (E2EL - TTFT) / (n - 1), for n > 1;
//   ITL  = every gap between consecutive text chunks (pooled over requests).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_tools/serve_runner.h"

namespace exactly::bench_tools {

struct LatencyStats {
  int64_t count = 0;  // samples; the figures below are NaN when 0
  double mean_ms = 0, std_ms = 0, median_ms = 0, p90_ms = 0, p99_ms = 0;
};

// Sample percentile with linear interpolation between order statistics
// (numpy's default), of `sorted` ascending values; NaN when empty.
double percentile(const std::vector<double>& sorted, double p);
LatencyStats latency_stats(std::vector<double> seconds);

struct Slo {
  double ttft_ms = 0;  // 0: no TTFT objective
  double tpot_ms = 0;  // 0: no TPOT objective
  bool any() const { return ttft_ms > 0 || tpot_ms > 0; }
};

struct ServeSummary {
  double request_rate = 0;  // asked for; +infinity when unpaced
  int max_concurrency = 0;
  int64_t completed = 0, failed = 0;
  double duration_s = 0;
  int64_t input_tokens = 0, output_tokens = 0;  // over completed requests
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  int64_t good_requests = 0;  // completed and within every SLO
  double goodput = 0;         // good_requests / duration; NaN without an SLO
  LatencyStats ttft, tpot, itl, e2el;
  std::vector<std::pair<std::string, int64_t>> failure_reasons;  // most frequent first
};

ServeSummary summarize(const LoadResult& run, const LoadShape& shape, const std::vector<BenchRequest>& requests,
                       const Slo& slo);

void print_summary(const ServeSummary& s, const Slo& slo, std::FILE* out);

nlohmann::json summary_json(const ServeSummary& s, const Slo& slo);

}  // namespace exactly::bench_tools
