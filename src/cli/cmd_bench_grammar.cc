// `exactly bench grammar`: what a grammar costs the host per token, alone:
// for a JSON schema and an answer it accepts, the time of each token's mask
// and the matcher's advance past the token, with the caches warm and after
// reading N MB between tokens (as a mask filled on a core whose caches hold
// other work: the forward pass's weights, another thread's data).
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "constrain/grammar_cache.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/loaded_model.h"
#include "server/generation_request.h"

namespace exactly::cli {

namespace {

constexpr int64_t kMaxFileBytes = int64_t{1} << 20;
constexpr int kMaxEvictMb = 4096;
constexpr int kMaxRepeats = 1000;

struct BenchGrammarOptions {
  ModelOptions model;
  std::string schema, text;
  std::vector<int> evict_mb = {0, 8, 64};
  int repeats = 10;
};

// The file, refused past kMaxFileBytes (an answer or a schema, not a corpus).
std::string read_small_file(const std::string& path, const char* what) {
  std::string s = read_file(path);
  if (static_cast<int64_t>(s.size()) > kMaxFileBytes)
    throw Error(strformat("%s: %s is over %lld bytes", what, path.c_str(), static_cast<long long>(kMaxFileBytes)),
                ExitCode::kBadInput);
  return s;
}

// Microseconds per token of mask + advance over the answer, `repeats` times,
// reading `evict_bytes` between tokens; the median of the repeats.
double time_tokens(const Constraint& grammar, const std::vector<int32_t>& ids, size_t vocab, size_t evict_bytes,
                   int repeats) {
  std::vector<uint32_t> mask((vocab + 31) / 32);
  std::vector<char> junk(evict_bytes + 1);
  volatile char sink = 0;
  std::vector<double> per_token;
  for (int r = 0; r < repeats; ++r) {
    auto state = grammar.start();
    double seconds = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      for (size_t b = 0; b < evict_bytes; b += 64) {
        junk[b] = static_cast<char>(junk[b] + 1);
        sink = static_cast<char>(sink + junk[b]);
      }
      const auto t0 = std::chrono::steady_clock::now();
      state->fill_mask(mask);
      const int32_t id = ids[i];
      if (((mask[static_cast<size_t>(id) / 32] >> (id % 32)) & 1u) == 0 || !state->accept(id))
        throw Error(strformat("--text: token %zu (id %d) is not allowed by the schema there", i, id),
                    ExitCode::kBadInput);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    per_token.push_back(1e6 * seconds / static_cast<double>(ids.size()));
  }
  std::nth_element(per_token.begin(), per_token.begin() + per_token.size() / 2, per_token.end());
  return per_token[per_token.size() / 2];
}

void run(const BenchGrammarOptions& o) {
  if (!GrammarCache::available()) throw Error("this build has no grammar engine (xgrammar)", ExitCode::kUsage);
  LoadedModel m = load_model(o.model.model, false, o.model.load_options());
  const auto vocab = static_cast<size_t>(m.config().vocab_size);
  GrammarCache cache(*m.tokenizer, m.config().vocab_size, server::kGrammarCacheBytes);
  std::shared_ptr<const Constraint> grammar;
  try {
    grammar = cache.get({GrammarSpec::Kind::kJsonSchema, read_small_file(o.schema, "--schema"), {}});
  } catch (const GrammarError& e) {
    throw Error(strformat("--schema: %s", e.what()), ExitCode::kBadInput);
  }
  std::string answer = read_small_file(o.text, "--text");
  while (!answer.empty() && (answer.back() == '\n' || answer.back() == '\r'))
    answer.pop_back();  // a file's last newline
  const std::vector<int32_t> ids = m.tokenizer->encode(answer, false);
  if (ids.empty()) throw Error("--text: the answer has no tokens", ExitCode::kBadInput);
  std::printf("%zu tokens of the answer, median of %d passes\n", ids.size(), o.repeats);
  std::printf("%10s  %22s\n", "read (MB)", "mask + advance (us)");
  for (int mb : o.evict_mb)
    std::printf("%10d  %22.1f\n", mb, time_tokens(*grammar, ids, vocab, static_cast<size_t>(mb) << 20, o.repeats));
}

}  // namespace

void register_bench_grammar(CLI::App& bench) {
  auto o = std::make_shared<BenchGrammarOptions>();
  CLI::App* cmd =
      bench.add_subcommand("grammar", "a JSON schema's cost per token on the host: mask and advance, warm and cold");
  add_model_options(*cmd, o->model);
  cmd->add_option("--schema", o->schema, "a JSON schema file")->required();
  cmd->add_option("--text", o->text, "an answer the schema accepts, tokenized by the model's tokenizer")->required();
  cmd->add_option("--evict-mb", o->evict_mb, "MB read between tokens, one timing each")
      ->check(CLI::Range(0, kMaxEvictMb))
      ->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "passes over the answer (the median is printed)")
      ->check(CLI::Range(1, kMaxRepeats))
      ->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
