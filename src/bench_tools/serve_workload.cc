#include "bench_tools/serve_workload.h"

#include <fstream>
#include <random>

#include "core/error.h"
#include "core/format.h"

namespace exactly::bench_tools {

namespace {

// Ids drawn below the vocabulary of any model we serve, above the usual
// special tokens, so a synthetic prompt is valid everywhere.
constexpr int32_t kFirstOrdinaryId = 3;
constexpr int32_t kSyntheticIdLimit = 32000;

BenchRequest parse_line(const std::string& line, const std::string& where, const std::string& model) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(where + ": not a JSON object", ExitCode::kBadInput);
  if (!j.contains("prompt") || !(j["prompt"].is_string() || j["prompt"].is_array()))
    throw Error(where + ": field 'prompt' must be a string or an array of token ids", ExitCode::kBadInput);
  if (!j.contains("max_tokens") || !j["max_tokens"].is_number_integer() || j["max_tokens"].get<int64_t>() < 1)
    throw Error(where + ": field 'max_tokens' must be a positive integer", ExitCode::kBadInput);
  BenchRequest r;
  if (j["prompt"].is_array()) {
    for (const auto& id : j["prompt"])
      if (!id.is_number_integer())
        throw Error(where + ": field 'prompt' holds a non-integer token id", ExitCode::kBadInput);
    r.prompt_tokens = static_cast<int64_t>(j["prompt"].size());
  }
  j.erase("arrival");  // a schedule hint for other benchmarks, not part of the request
  j.erase("stream");
  j.erase("stream_options");
  if (!model.empty() && !j.contains("model")) j["model"] = model;
  r.body = std::move(j);
  return r;
}

}  // namespace

std::vector<BenchRequest> load_dataset(const std::string& path, int count, const std::string& model) {
  std::ifstream in(path);
  if (!in) throw Error(strformat("cannot open %s", path.c_str()), ExitCode::kBadInput);
  std::vector<BenchRequest> lines;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(parse_line(line, strformat("%s:%zu", path.c_str(), n), model));
  }
  if (lines.empty()) throw Error(strformat("%s holds no requests", path.c_str()), ExitCode::kBadInput);
  if (count <= 0) return lines;
  std::vector<BenchRequest> out;
  out.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) out.push_back(lines[static_cast<size_t>(i) % lines.size()]);
  return out;
}

std::vector<BenchRequest> synthetic_requests(int count, int input_len, int output_len, uint64_t seed,
                                             const std::string& model) {
  std::mt19937_64 rng(seed);
  std::vector<BenchRequest> out;
  out.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    std::vector<int32_t> ids(static_cast<size_t>(input_len));
    // A modulo, not a std:: distribution, so the prompts are the same on
    // every standard library.
    for (auto& id : ids)
      id = kFirstOrdinaryId + static_cast<int32_t>(rng() % static_cast<uint64_t>(kSyntheticIdLimit - kFirstOrdinaryId));
    BenchRequest r;
    r.body = {{"prompt", ids}, {"max_tokens", output_len}, {"temperature", 0}, {"ignore_eos", true}};
    if (!model.empty()) r.body["model"] = model;
    r.prompt_tokens = input_len;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace exactly::bench_tools
