// `exactly bench throughput`: offline batch generation through the engine, as
// Hugging Face's generate is usually measured: N requests of random prompt
// tokens (input length) each generating exactly the output length (EOS
// ignored; greedy, or sampled with --temperature), all submitted at once. Reports, per batch size, the
// medians over repetitions of: generated tokens per second end to end, the
// decode phase's tokens per second (after every request has its first token)
// and time per decode step against that step's floor — the bytes it must read
// (weights plus the KV of every running sequence) at the given bandwidth.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/engine.h"

namespace exactly::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct ThroughputOptions {
  ModelOptions model;
  EngineConfig engine;
  std::vector<int> batch_sizes{1, 8, 32};
  int input_len = 512;
  int output_len = 128;
  int repetitions = 3;
  double bandwidth_gbs = 0;  // 0: no floor reported
  float temperature = 0;     // > 0: sampled (top-k 40, top-p 0.95, min-p 0.05, seeded) instead of greedy
  std::string json_out;
  std::string step_trace;  // one CSV row per engine step of each batch size's last run
};

// One engine step as the trace records it: where a run's time goes between
// prompt work and decoding, and between the model's pass and the host.
struct StepRecord {
  double ms = 0;          // the whole step, wall clock
  double forward_ms = 0;  // the model's pass(es) within it
  int64_t prompt_tokens = 0;
  int64_t generated = 0;
  int64_t running = 0;
};

struct RunResult {
  double total_s = 0;
  double decode_s = 0;  // from the moment every request has its first token
  int64_t decode_tokens = 0;
  int64_t decode_steps = 0;
  double forward_ms = 0;  // per decode-only step: the model's pass alone, without scheduling and sampling
  std::vector<StepRecord> steps;
};

RunResult run_once(Engine& engine, int batch, const ThroughputOptions& o, std::mt19937& rng, bool trace) {
  std::uniform_int_distribution<int32_t> token(0, engine.tokenizer().vocab_size() - 1);
  const auto t0 = Clock::now();
  for (int i = 0; i < batch; ++i) {
    RequestParams p;
    for (int j = 0; j < o.input_len; ++j) p.prompt.push_back(token(rng));
    p.max_tokens = o.output_len;
    p.ignore_eos = true;
    p.sampling.temperature = o.temperature;
    p.sampling.seed = static_cast<uint64_t>(i);
    engine.add_request(p);
  }
  RunResult r;
  const EngineStats before = engine.stats();
  int waiting_first = batch;
  Clock::time_point decode_start{};
  while (engine.has_unfinished()) {
    const bool decoding = waiting_first == 0;
    EngineStats s0;
    if (trace) s0 = engine.stats();
    const auto step_start = Clock::now();
    std::vector<RequestOutput> outs = engine.step();
    if (trace) {
      const EngineStats& s1 = engine.stats();
      r.steps.push_back({1e3 * std::chrono::duration<double>(Clock::now() - step_start).count(),
                         1e3 * (s1.forward_seconds - s0.forward_seconds),
                         s1.prompt_tokens_computed - s0.prompt_tokens_computed, s1.generated_tokens - s0.generated_tokens,
                         static_cast<int64_t>(engine.num_running())});
    }
    for (const RequestOutput& out : outs)
      for (const CompletionDelta& d : out.completions) {
        if (decoding) r.decode_tokens += static_cast<int64_t>(d.token_ids.size());
        else if (!d.token_ids.empty() && out.completion_tokens == static_cast<int64_t>(d.token_ids.size())) --waiting_first;
      }
    if (decoding) ++r.decode_steps;
    if (!decoding && waiting_first == 0) decode_start = Clock::now();
  }
  const auto t1 = Clock::now();
  r.total_s = std::chrono::duration<double>(t1 - t0).count();
  r.decode_s = std::chrono::duration<double>(t1 - decode_start).count();
  const EngineStats& after = engine.stats();
  const int64_t steps = after.decode_only_steps - before.decode_only_steps;
  r.forward_ms = steps > 0 ? 1e3 * (after.decode_only_seconds - before.decode_only_seconds) / static_cast<double>(steps) : 0;
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void run(ThroughputOptions& o) {
  if (o.input_len < 1 || o.output_len < 2) throw Error("--input-len must be >= 1 and --output-len >= 2", ExitCode::kUsage);
  std::ofstream trace;
  if (!o.step_trace.empty()) {
    trace.open(o.step_trace);
    if (!trace) throw Error(strformat("cannot write the step trace %s", o.step_trace.c_str()), ExitCode::kUsage);
    trace << "batch,step,ms,forward_ms,prompt_tokens,generated,running\n";
  }
  LoadedModel m = load_model(o.model.model, false, o.model.load_options());
  const int max_batch = *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end());
  o.engine.threads = o.model.threads;
  o.engine.max_num_seqs = std::max(o.engine.max_num_seqs, max_batch);
  o.engine.enable_prefix_caching = false;  // random prompts share nothing anyway
  Engine engine(m, o.engine);
  const ModelConfig& c = m.config();
  const int64_t weight_bytes = m.model->weight_bytes();
  const int64_t kv_slot = m.model->kv_bytes_per_slot();
  std::printf("model %s on %s: %s of weights per pass, %s of KV per token; KV pool %lld blocks of %d\n",
              c.name.c_str(), m.model->device(), human_bytes(static_cast<double>(weight_bytes)).c_str(),
              human_bytes(static_cast<double>(kv_slot)).c_str(), static_cast<long long>(engine.kv_stats().total_blocks),
              engine.config().block_size);
  const std::string sampling =
      o.temperature > 0 ? strformat("sampled at temperature %g (top-k 40, top-p 0.95, min-p 0.05)", o.temperature)
                        : std::string("greedy");
  std::printf("input %d, output %d tokens, %s, EOS ignored; medians of %d runs\n", o.input_len, o.output_len,
              sampling.c_str(), o.repetitions);
  std::printf("| batch | tokens/s (end to end) | decode tokens/s | ms per decode step | of which forward | floor ms | floor / step |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::mt19937 rng(1234);
  nlohmann::json results = nlohmann::json::array();
  for (int batch : o.batch_sizes) {
    std::vector<double> e2e, decode, step_ms, forward_ms;
    for (int rep = 0; rep < o.repetitions; ++rep) {
      const RunResult r = run_once(engine, batch, o, rng, trace.is_open() && rep + 1 == o.repetitions);
      for (size_t i = 0; i < r.steps.size(); ++i) {
        const StepRecord& t = r.steps[i];
        trace << batch << ',' << i << ',' << t.ms << ',' << t.forward_ms << ',' << t.prompt_tokens << ','
              << t.generated << ',' << t.running << '\n';
      }
      e2e.push_back(static_cast<double>(batch) * o.output_len / r.total_s);
      decode.push_back(static_cast<double>(r.decode_tokens) / r.decode_s);
      step_ms.push_back(1e3 * r.decode_s / static_cast<double>(std::max<int64_t>(1, r.decode_steps)));
      forward_ms.push_back(r.forward_ms);
    }
    // A decode step reads every weight once and the KV of each running
    // sequence, at its mean context length over the decode phase.
    const double mean_ctx = o.input_len + o.output_len / 2.0;
    const double step_bytes = static_cast<double>(weight_bytes) + batch * mean_ctx * static_cast<double>(kv_slot);
    const double floor_ms = o.bandwidth_gbs > 0 ? step_bytes / (o.bandwidth_gbs * 1e9) * 1e3 : 0;
    const double ms = median(step_ms);
    std::printf("| %d | %.1f | %.1f | %.3f | %.3f | %.3f | %.0f%% |\n", batch, median(e2e), median(decode), ms,
                median(forward_ms), floor_ms,
                floor_ms > 0 ? 100 * floor_ms / ms : 0.0);
    std::fflush(stdout);
    results.push_back({{"batch", batch}, {"tokens_per_second", median(e2e)}, {"decode_tokens_per_second", median(decode)},
                       {"ms_per_decode_step", ms}, {"forward_ms_per_decode_step", median(forward_ms)}, {"floor_ms", floor_ms}, {"step_bytes", step_bytes},
                       {"runs_tokens_per_second", e2e}, {"runs_decode_tokens_per_second", decode}});
  }
  if (const std::string report = m.model->memory_report(); !report.empty()) std::printf("%s\n", report.c_str());
  if (!o.json_out.empty()) {
    nlohmann::json j = {{"model", c.name}, {"device", m.model->device()}, {"input_len", o.input_len},
                        {"output_len", o.output_len}, {"temperature", o.temperature}, {"weight_bytes", weight_bytes}, {"kv_bytes_per_token", kv_slot},
                        {"results", results}};
    std::ofstream(o.json_out) << j.dump(2) << '\n';
  }
}

}  // namespace

void register_bench_throughput(CLI::App& bench) {
  auto o = std::make_shared<ThroughputOptions>();
  CLI::App* cmd = bench.add_subcommand("throughput", "offline batch generation: tokens/s and time per decode step");
  add_model_options(*cmd, o->model);
  add_engine_options(*cmd, o->engine);
  cmd->add_option("--batch-sizes", o->batch_sizes, "requests submitted at once")->delimiter(',')->capture_default_str();
  cmd->add_option("--input-len", o->input_len, "prompt tokens per request")->capture_default_str();
  cmd->add_option("--output-len", o->output_len, "generated tokens per request")->capture_default_str();
  cmd->add_option("-r,--repetitions", o->repetitions, "runs of each batch size")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--bandwidth", o->bandwidth_gbs, "memory bandwidth in GB/s for the per-step floor (H200: 4220)");
  cmd->add_option("--temperature", o->temperature, "sample at this temperature (0: greedy)")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--json", o->json_out, "write results as JSON");
  cmd->add_option("--step-trace", o->step_trace,
                  "write one CSV row per engine step of each batch size's last run (wall and forward ms, tokens)");
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
