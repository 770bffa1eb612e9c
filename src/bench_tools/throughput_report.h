// `exactly bench throughput`'s report: per batch size, the medians over
// repetitions of generated tokens per second end to end, the decode phase's
// tokens per second (after every request has its first token) and time per
// decode step against that step's floor — the bytes it must read (weights
// plus the KV of every running sequence) at the given bandwidth. As a
// Markdown table, as JSON, and each step of a run as a CSV row.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_tools/throughput_runner.h"
#include "engine/engine.h"

namespace exactly::bench_tools {

// A batch size's runs, one entry per repetition each.
struct BatchRuns {
  std::vector<double> e2e;         // generated tokens/s, end to end
  std::vector<double> decode;      // decode-phase tokens/s
  std::vector<double> step_ms;     // ms per decode step
  std::vector<double> forward_ms;  // ms of the model's pass per decode-only step

  void add(int batch, const ThroughputSetup& setup, const ThroughputRun& run);
};

// The model, the pool, the workload and the table's head.
void print_throughput_header(const LoadedModel& m, const Engine& engine, const ThroughputSetup& setup);

// What a decode step reads of the weights: all of them, except that of a
// mixture of experts only the experts some token of the step chooses.
struct StepWeights {
  int64_t weight_bytes = 0;  // every weight a pass may read
  int64_t expert_bytes = 0;  // of which the experts' (all layers)
  int n_experts = 0, experts_used = 0;
  // The bytes a step of `batch` tokens reads, each token's experts drawn
  // independently and uniformly: an expert is read when any token picks it.
  double read_by(int batch) const;
};
StepWeights step_weights(const LoadedModel& m);

// Prints the batch size's row and returns its JSON entry.
nlohmann::json report_batch(int batch, const BatchRuns& runs, const ThroughputSetup& setup, const StepWeights& weights,
                            int64_t kv_slot_bytes);

nlohmann::json throughput_json(const LoadedModel& m, const ThroughputSetup& setup, nlohmann::json results);

void write_step_trace_header(std::ostream& out);
void write_step_trace(std::ostream& out, int batch, const std::vector<StepRecord>& steps);

}  // namespace exactly::bench_tools
