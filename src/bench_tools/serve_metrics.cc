#include "bench_tools/serve_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "core/format.h"

namespace exactly::bench_tools {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string rate_text(double rate) { return std::isinf(rate) ? "inf" : strformat("%g", rate); }

std::string slo_text(double ms) { return ms > 0 ? strformat("%g", ms) : "any"; }

// nlohmann writes NaN as null, which is what an empty distribution should read as.
nlohmann::json stats_json(const LatencyStats& s) {
  return {{"count", s.count},        {"mean_ms", s.mean_ms}, {"std_ms", s.std_ms},
          {"median_ms", s.median_ms}, {"p90_ms", s.p90_ms},   {"p99_ms", s.p99_ms}};
}

void print_stats_row(std::FILE* out, const char* name, const LatencyStats& s) {
  if (s.count == 0) {
    std::fprintf(out, "| %-4s | - | - | - | - | - |\n", name);
    return;
  }
  std::fprintf(out, "| %-4s | %.2f | %.2f | %.2f | %.2f | %lld |\n", name, s.mean_ms, s.median_ms, s.p90_ms, s.p99_ms,
               static_cast<long long>(s.count));
}

}  // namespace

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return kNaN;
  const double pos = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

LatencyStats latency_stats(std::vector<double> seconds) {
  LatencyStats s;
  s.count = static_cast<int64_t>(seconds.size());
  if (seconds.empty()) {
    s.mean_ms = s.std_ms = s.median_ms = s.p90_ms = s.p99_ms = kNaN;
    return s;
  }
  for (double& x : seconds) x *= 1000.0;
  std::sort(seconds.begin(), seconds.end());
  const double n = static_cast<double>(seconds.size());
  s.mean_ms = std::accumulate(seconds.begin(), seconds.end(), 0.0) / n;
  double var = 0;
  for (double x : seconds) var += (x - s.mean_ms) * (x - s.mean_ms);
  s.std_ms = std::sqrt(var / n);
  s.median_ms = percentile(seconds, 50);
  s.p90_ms = percentile(seconds, 90);
  s.p99_ms = percentile(seconds, 99);
  return s;
}

ServeSummary summarize(const LoadResult& run, const LoadShape& shape, const std::vector<BenchRequest>& requests,
                       const Slo& slo) {
  ServeSummary s;
  s.request_rate = shape.request_rate;
  s.max_concurrency = shape.max_concurrency;
  s.duration_s = run.duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  std::map<std::string, int64_t> reasons;
  for (size_t i = 0; i < run.outcomes.size(); ++i) {
    const RequestOutcome& o = run.outcomes[i];
    if (!o.ok) {
      ++s.failed;
      ++reasons[o.error];
      continue;
    }
    ++s.completed;
    s.output_tokens += o.output_tokens;
    s.input_tokens += o.prompt_tokens >= 0 ? o.prompt_tokens : std::max<int64_t>(0, requests[i].prompt_tokens);
    ttft.push_back(o.ttft_s);
    e2el.push_back(o.e2e_s);
    itl.insert(itl.end(), o.itl_s.begin(), o.itl_s.end());
    // One token has no time per output token; it cannot miss a TPOT objective.
    double request_tpot = 0;
    if (o.output_tokens > 1) {
      request_tpot = (o.e2e_s - o.ttft_s) / static_cast<double>(o.output_tokens - 1);
      tpot.push_back(request_tpot);
    }
    const bool ttft_ok = slo.ttft_ms <= 0 || o.ttft_s * 1000.0 <= slo.ttft_ms;
    const bool tpot_ok = slo.tpot_ms <= 0 || request_tpot * 1000.0 <= slo.tpot_ms;
    if (ttft_ok && tpot_ok) ++s.good_requests;
  }
  const double d = std::max(run.duration_s, 1e-9);
  s.request_throughput = static_cast<double>(s.completed) / d;
  s.output_throughput = static_cast<double>(s.output_tokens) / d;
  s.total_token_throughput = static_cast<double>(s.input_tokens + s.output_tokens) / d;
  s.goodput = slo.any() ? static_cast<double>(s.good_requests) / d : kNaN;
  s.ttft = latency_stats(std::move(ttft));
  s.tpot = latency_stats(std::move(tpot));
  s.itl = latency_stats(std::move(itl));
  s.e2el = latency_stats(std::move(e2el));
  s.failure_reasons.assign(reasons.begin(), reasons.end());
  std::stable_sort(s.failure_reasons.begin(), s.failure_reasons.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return s;
}

void print_summary(const ServeSummary& s, const Slo& slo, std::FILE* out) {
  std::fprintf(out, "request rate %s req/s, max concurrency %s\n", rate_text(s.request_rate).c_str(),
               s.max_concurrency > 0 ? std::to_string(s.max_concurrency).c_str() : "unbounded");
  std::fprintf(out, "  duration                 %10.3f s\n", s.duration_s);
  std::fprintf(out, "  completed / failed       %10lld / %lld\n", static_cast<long long>(s.completed),
               static_cast<long long>(s.failed));
  std::fprintf(out, "  input / output tokens    %10lld / %lld\n", static_cast<long long>(s.input_tokens),
               static_cast<long long>(s.output_tokens));
  std::fprintf(out, "  request throughput       %10.3f req/s\n", s.request_throughput);
  std::fprintf(out, "  output token throughput  %10.2f tok/s\n", s.output_throughput);
  std::fprintf(out, "  total token throughput   %10.2f tok/s\n", s.total_token_throughput);
  if (slo.any())
    std::fprintf(out, "  goodput                  %10.3f req/s (%lld requests with TTFT <= %s ms, TPOT <= %s ms)\n",
                 s.goodput, static_cast<long long>(s.good_requests),
                 slo_text(slo.ttft_ms).c_str(), slo_text(slo.tpot_ms).c_str());
  std::fprintf(out, "| ms   | mean | median | p90 | p99 | samples |\n| --- | ---: | ---: | ---: | ---: | ---: |\n");
  print_stats_row(out, "TTFT", s.ttft);
  print_stats_row(out, "TPOT", s.tpot);
  print_stats_row(out, "ITL", s.itl);
  print_stats_row(out, "E2EL", s.e2el);
  // Reasons that quote the server may all differ; the commonest few say enough.
  constexpr size_t kReasonsShown = 5;
  for (size_t i = 0; i < s.failure_reasons.size() && i < kReasonsShown; ++i)
    std::fprintf(out, "  failed x%lld: %s\n", static_cast<long long>(s.failure_reasons[i].second),
                 s.failure_reasons[i].first.c_str());
  if (s.failure_reasons.size() > kReasonsShown)
    std::fprintf(out, "  ... and %zu other failure reasons\n", s.failure_reasons.size() - kReasonsShown);
}

nlohmann::json summary_json(const ServeSummary& s, const Slo& slo) {
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& [reason, count] : s.failure_reasons) failures.push_back({{"reason", reason}, {"count", count}});
  nlohmann::json j = {
      {"request_rate", std::isinf(s.request_rate) ? nlohmann::json("inf") : nlohmann::json(s.request_rate)},
      {"max_concurrency", s.max_concurrency > 0 ? nlohmann::json(s.max_concurrency) : nlohmann::json(nullptr)},
      {"duration_s", s.duration_s},
      {"completed", s.completed},
      {"failed", s.failed},
      {"input_tokens", s.input_tokens},
      {"output_tokens", s.output_tokens},
      {"request_throughput", s.request_throughput},
      {"output_throughput", s.output_throughput},
      {"total_token_throughput", s.total_token_throughput},
      {"ttft", stats_json(s.ttft)},
      {"tpot", stats_json(s.tpot)},
      {"itl", stats_json(s.itl)},
      {"e2el", stats_json(s.e2el)},
      {"failures", failures},
  };
  if (slo.any()) {
    j["slo"] = {{"ttft_ms", slo.ttft_ms > 0 ? nlohmann::json(slo.ttft_ms) : nlohmann::json(nullptr)},
                {"tpot_ms", slo.tpot_ms > 0 ? nlohmann::json(slo.tpot_ms) : nlohmann::json(nullptr)}};
    j["good_requests"] = s.good_requests;
    j["goodput"] = s.goodput;
  }
  return j;
}

}  // namespace exactly::bench_tools
