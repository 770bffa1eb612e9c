// The latency-throughput chart of a serving sweep: one point per request rate
// at (achieved output tokens/s, latency), median and p99 as two series, so
// the knee where latency climbs while throughput stops growing is visible.
#pragma once

#include <string>
#include <vector>

#include "bench_tools/serve_metrics.h"

namespace exactly::bench_tools {

enum class ChartLatency { kTpot, kTtft };

// Writes the chart as a PNG; throws Error when the file cannot be written.
void plot_latency_throughput(const std::vector<ServeSummary>& runs, ChartLatency latency, const std::string& path);

}  // namespace exactly::bench_tools
