#include "bench_tools/throughput_runner.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "bench_tools/throughput_report.h"
#include "bench_tools/timing.h"

namespace exactly::bench_tools {

void adapt_engine_config(EngineConfig& config, const ThroughputSetup& setup) {
  const int max_batch = *std::max_element(setup.batch_sizes.begin(), setup.batch_sizes.end());
  config.max_num_seqs = std::max(config.max_num_seqs, max_batch);
  config.enable_prefix_caching = false;
}

namespace {

void submit_batch(Engine& engine, int batch, const ThroughputSetup& setup, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> token(0, engine.tokenizer().vocab_size() - 1);
  for (int i = 0; i < batch; ++i) {
    RequestParams p;
    for (int j = 0; j < setup.input_len; ++j) p.prompt.push_back(token(rng));
    p.max_tokens = setup.output_len;
    p.ignore_eos = true;
    p.sampling.temperature = setup.temperature;
    p.sampling.seed = static_cast<uint64_t>(i);
    engine.add_request(p);
  }
}

StepRecord step_record(const Engine& engine, const EngineStats& before, Clock::time_point step_start) {
  const EngineStats& after = engine.stats();
  return {ms_between(step_start, Clock::now()), 1e3 * (after.forward_seconds - before.forward_seconds),
          after.prompt_tokens_computed - before.prompt_tokens_computed,
          after.generated_tokens - before.generated_tokens, static_cast<int64_t>(engine.num_running())};
}

}  // namespace

ThroughputRun run_batch_once(Engine& engine, int batch, const ThroughputSetup& setup, std::mt19937& rng, bool trace) {
  const auto t0 = Clock::now();
  submit_batch(engine, batch, setup, rng);
  ThroughputRun r;
  const EngineStats before = engine.stats();
  int waiting_first = batch;
  Clock::time_point decode_start{};
  while (engine.has_unfinished()) {
    const bool decoding = waiting_first == 0;
    EngineStats s0;
    if (trace) s0 = engine.stats();
    const auto step_start = Clock::now();
    std::vector<RequestOutput> outs = engine.step();
    if (trace) r.steps.push_back(step_record(engine, s0, step_start));
    for (const RequestOutput& out : outs)
      for (const CompletionDelta& d : out.completions) {
        if (decoding)
          r.decode_tokens += static_cast<int64_t>(d.token_ids.size());
        else if (!d.token_ids.empty() && out.completion_tokens == static_cast<int64_t>(d.token_ids.size()))
          --waiting_first;
      }
    if (decoding) ++r.decode_steps;
    if (!decoding && waiting_first == 0) decode_start = Clock::now();
  }
  const auto t1 = Clock::now();
  r.total_s = seconds_between(t0, t1);
  r.decode_s = seconds_between(decode_start, t1);
  const EngineStats& after = engine.stats();
  const int64_t steps = after.decode_only_steps - before.decode_only_steps;
  r.forward_ms =
      steps > 0 ? 1e3 * (after.decode_only_seconds - before.decode_only_seconds) / static_cast<double>(steps) : 0;
  return r;
}

nlohmann::json run_throughput(const LoadedModel& m, Engine& engine, const ThroughputSetup& setup,
                              std::ostream* step_trace) {
  const StepWeights weights = step_weights(m);
  const int64_t kv_slot = m.model->kv_bytes_per_slot();
  print_throughput_header(m, engine, setup);
  std::mt19937 rng(1234);
  nlohmann::json results = nlohmann::json::array();
  for (int batch : setup.batch_sizes) {
    BatchRuns runs;
    for (int rep = 0; rep < setup.repetitions; ++rep) {
      const ThroughputRun r = run_batch_once(engine, batch, setup, rng, step_trace && rep + 1 == setup.repetitions);
      if (step_trace) write_step_trace(*step_trace, batch, r.steps);
      runs.add(batch, setup, r);
    }
    results.push_back(report_batch(batch, runs, setup, weights, kv_slot));
  }
  if (const std::string report = m.model->memory_report(); !report.empty()) std::printf("%s\n", report.c_str());
  return throughput_json(m, setup, std::move(results));
}

}  // namespace exactly::bench_tools
