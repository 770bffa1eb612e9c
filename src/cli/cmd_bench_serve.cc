// `exactly bench serve`: load an OpenAI-compatible server with streaming
// completions and report throughput and latency separately, as a client sees
// them: a server can raise tokens/s by batching more while each user waits
// longer, so neither figure means much without the other. A --sweep over
// request rates traces that trade-off; --plot draws it.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "bench_tools/serve_chart.h"
#include "bench_tools/serve_client.h"
#include "bench_tools/serve_metrics.h"
#include "bench_tools/serve_runner.h"
#include "bench_tools/serve_workload.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/format.h"

namespace exactly::cli {

using namespace bench_tools;

namespace {

struct BenchServeOptions {
  std::string url;
  std::string dataset;  // a JSONL file, or "synthetic"
  int num_prompts = 0;
  std::string request_rate;  // requests/s or "inf"; empty: not given
  int max_concurrency = 0;
  std::vector<std::string> sweep;  // request rates to run in turn
  std::string model;
  int input_len = 128, output_len = 128;
  uint64_t seed = 0;
  Slo slo;
  std::string json_out, plot_out;
  std::string plot_latency = "tpot";
  std::string api_key;
  double timeout_s = 300;
};

double parse_rate(const std::string& text) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double r = 0;
  try {
    r = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(r > 0))
    throw Error("request rate '" + text + "' is not a positive number or 'inf'", ExitCode::kUsage);
  return r;
}

// The rates to run: the sweep, or the one --request-rate (infinite when only
// a concurrency is given: C workers back to back).
std::vector<double> rates_to_run(const BenchServeOptions& o) {
  std::vector<double> rates;
  for (const std::string& s : o.sweep) rates.push_back(parse_rate(s));
  if (!rates.empty()) return rates;
  if (!o.request_rate.empty()) return {parse_rate(o.request_rate)};
  if (o.max_concurrency > 0) return {std::numeric_limits<double>::infinity()};
  throw Error("give --request-rate, --max-concurrency or --sweep", ExitCode::kUsage);
}

std::vector<BenchRequest> load_requests(const BenchServeOptions& o) {
  if (o.dataset != "synthetic") return load_dataset(o.dataset, o.num_prompts, o.model);
  if (o.num_prompts <= 0) throw Error("--num-prompts is required with --dataset synthetic", ExitCode::kUsage);
  if (o.input_len < 1 || o.output_len < 1)
    throw Error("--input-len and --output-len must be positive", ExitCode::kUsage);
  return synthetic_requests(o.num_prompts, o.input_len, o.output_len, o.seed, o.model);
}

void run(const BenchServeOptions& o) {
  Endpoint endpoint = parse_endpoint(o.url);
  endpoint.api_key = o.api_key;
  endpoint.timeout_s = o.timeout_s;
  const std::vector<double> rates = rates_to_run(o);
  const std::vector<BenchRequest> requests = load_requests(o);
  std::printf("%zu requests to %s%s\n", requests.size(), endpoint.scheme_host_port.c_str(), endpoint.path.c_str());
  std::vector<ServeSummary> runs;
  for (double rate : rates) {
    const LoadShape shape{rate, o.max_concurrency, o.seed};
    const LoadResult result = run_load(endpoint, requests, shape);
    runs.push_back(summarize(result, shape, requests, o.slo));
    print_summary(runs.back(), o.slo, stdout);
    std::fflush(stdout);
  }
  if (!o.json_out.empty()) {
    nlohmann::json j;
    if (o.sweep.empty()) {
      j = summary_json(runs.front(), o.slo);
    } else {
      j = {{"runs", nlohmann::json::array()}};
      for (const ServeSummary& s : runs) j["runs"].push_back(summary_json(s, o.slo));
    }
    j["num_prompts"] = requests.size();
    std::ofstream out(o.json_out);
    out << j.dump(2) << '\n';
    if (!out) throw Error("cannot write " + o.json_out);
  }
  if (!o.plot_out.empty())
    plot_latency_throughput(runs, o.plot_latency == "ttft" ? ChartLatency::kTtft : ChartLatency::kTpot, o.plot_out);
}

}  // namespace

void register_bench_serve(CLI::App& bench) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* cmd = bench.add_subcommand("serve", "throughput and latency of an OpenAI-compatible server under load");
  cmd->add_option("--url", o->url, "server base URL (http://host:port) or full endpoint URL")->required();
  cmd->add_option("--dataset", o->dataset, "JSONL of completions requests (bench/make_workload.py), or 'synthetic'")
      ->required();
  cmd->add_option("--num-prompts", o->num_prompts, "requests to send (dataset: cycles; 0: every line once)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--request-rate", o->request_rate, "Poisson arrivals, requests/s ('inf': all at once)");
  cmd->add_option("--max-concurrency", o->max_concurrency, "requests in flight at most (alone: closed loop)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--sweep", o->sweep, "request rates to run in turn, e.g. 1,2,4,inf")->delimiter(',');
  cmd->add_option("--model", o->model, "model name sent with each request");
  cmd->add_option("--input-len", o->input_len, "synthetic prompt tokens")->capture_default_str();
  cmd->add_option("--output-len", o->output_len, "synthetic output tokens")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of synthetic prompts and arrival gaps")->capture_default_str();
  cmd->add_option("--slo-ttft-ms", o->slo.ttft_ms, "goodput objective: time to first token, ms")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--slo-tpot-ms", o->slo.tpot_ms, "goodput objective: time per output token, ms")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--json", o->json_out, "write results as JSON");
  cmd->add_option("--plot", o->plot_out, "draw latency against throughput as a PNG");
  cmd->add_option("--plot-latency", o->plot_latency, "latency on the chart: tpot or ttft")
      ->check(CLI::IsMember({"tpot", "ttft"}))->capture_default_str();
  cmd->add_option("--api-key", o->api_key, "bearer token");
  cmd->add_option("--timeout", o->timeout_s, "seconds one request may take")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
