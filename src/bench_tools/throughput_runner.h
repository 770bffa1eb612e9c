// Offline batch generation through the engine, as Hugging Face's generate is
// usually measured (`exactly bench throughput`): N requests of random prompt
// tokens (input length) each generating exactly the output length (EOS
// ignored; greedy, or sampled at a temperature), all submitted at once.
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace exactly::bench_tools {

struct ThroughputSetup {
  std::vector<int> batch_sizes;  // requests submitted at once, one row each
  int input_len = 0;             // prompt tokens per request
  int output_len = 0;            // generated tokens per request
  int repetitions = 0;           // runs of each batch size
  double bandwidth_gbs = 0;      // for the per-step floor; 0: no floor reported
  float temperature = 0;         // > 0: sampled (top-k 40, top-p 0.95, min-p 0.05, seeded) instead of greedy
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

struct ThroughputRun {
  double total_s = 0;
  double decode_s = 0;  // from the moment every request has its first token
  int64_t decode_tokens = 0;
  int64_t decode_steps = 0;
  double forward_ms = 0;          // per decode-only step: the model's pass alone, without scheduling and sampling
  std::vector<StepRecord> steps;  // [engine steps], filled only when traced
};

// The engine settings the benchmark needs: room for the largest batch at
// once, and no prefix caching (random prompts share nothing anyway).
void adapt_engine_config(EngineConfig& config, const ThroughputSetup& setup);

// Submits `batch` requests and steps the engine until all finish.
ThroughputRun run_batch_once(Engine& engine, int batch, const ThroughputSetup& setup, std::mt19937& rng, bool trace);

// Every batch size `repetitions` times: prints the report's header, a row per
// batch size as it is measured and the model's memory report; writes the
// steps of each batch size's last run to `step_trace` when given. Returns the
// JSON report.
nlohmann::json run_throughput(const LoadedModel& m, Engine& engine, const ThroughputSetup& setup,
                              std::ostream* step_trace);

}  // namespace exactly::bench_tools
