// The requests a serving benchmark sends: read from a JSONL file of
// completions requests (bench/make_workload.py) or made up as random token-id
// prompts of a fixed length.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace exactly::bench_tools {

struct BenchRequest {
  nlohmann::json body;         // a /v1/completions request, without the stream fields
  int64_t prompt_tokens = -1;  // known when the prompt is token ids; -1 for text
};

// The first `count` requests of a JSONL file, cycling through the file when it
// has fewer (count 0: every line once). Each line needs `prompt` (string or
// token ids) and `max_tokens`; the benchmark-only key `arrival` is dropped.
// `model`, when not empty, fills in lines that name none.
// Throws Error(kBadInput) naming the file, line and field.
std::vector<BenchRequest> load_dataset(const std::string& path, int count, const std::string& model);

// `count` prompts of `input_len` random token ids (fixed `seed`), each asking
// for exactly `output_len` tokens (ignore_eos, greedy).
std::vector<BenchRequest> synthetic_requests(int count, int input_len, int output_len, uint64_t seed,
                                             const std::string& model);

}  // namespace exactly::bench_tools
