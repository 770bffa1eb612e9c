// What a verify step costs, and the speedup that speculation would give at a
// given acceptance rate with that cost (`exactly bench spec-cost`).
//
// For each batch size B, B sequences hold `context` tokens of KV; a step of
// 1 + k tokens per sequence is timed for k = 0 .. max_drafts
// (verify_step_timer.h). With acceptance rate a, independent per draft, a
// chain of k drafts yields (1 - a^(k+1)) / (1 - a) tokens a step, so the
// speedup over plain decoding is that times t(0) / t(k), best over k. Drafts
// are taken as free (prompt lookup's are; a draft model's or head's passes
// add to t(k)), so the figure is the ceiling the step's cost allows.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/loaded_model.h"

namespace exactly::bench_tools {

struct SpecCostSetup {
  std::vector<int> batch_sizes;    // sequences per step, one row each
  int context = 0;                 // tokens of KV each sequence holds
  int max_drafts = 0;              // k = 0 .. this many
  int repetitions = 0;             // timed steps per cell
  std::vector<double> acceptance;  // rates to price, each inside (0, 1)
};

// Tokens a step yields with k drafts accepted independently at rate a.
double tokens_per_step(double a, int k);

// Prints the table of step times as it is measured, then the table of
// speedups; returns the JSON report. `model_name` names the model in both.
nlohmann::json run_spec_cost_sweep(LoadedModel& m, const std::string& model_name, const SpecCostSetup& setup);

}  // namespace exactly::bench_tools
