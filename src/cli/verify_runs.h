// What `exactly verify` runs and compares: requests through a fresh engine in
// phases (a phase is submitted once the one before has finished), and each
// request's outcome as bits — every choice's tokens, its logprobs and top
// alternatives, and the prompt's logprobs when asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace exactly::cli {

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;        // [n][generated]
  std::vector<std::vector<TokenLogprobs>> logprobs;  // [n][generated]
  std::vector<std::optional<TokenLogprobs>> prompt_logprobs;
  int64_t cached_prompt_tokens = 0;
};

// Whether two outcomes are the same bits; else where they part, in words
// ("token 5 of choice 0", "logprobs of token 3 of choice 1").
std::optional<std::string> first_difference(const Outcome& a, const Outcome& b);

struct RunResult {
  std::vector<Outcome> outcomes;  // one per request, phases in order
  EngineStats stats;
};

// Runs the phases through one engine made for `config`, which is destroyed
// before returning (on a GPU its KV pool is freed for the next run).
RunResult run_phases(LoadedModel& model, const EngineConfig& config,
                     const std::vector<std::vector<RequestParams>>& phases);

}  // namespace exactly::cli
