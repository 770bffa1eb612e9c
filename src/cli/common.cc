#include "cli/common.h"

#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "core/format.h"
#include "core/thread_pool.h"
#include "kvcache/capacity.h"

#ifndef EXACTLY_SOURCE_DIR
#define EXACTLY_SOURCE_DIR "."
#endif

namespace exactly::cli {

std::string default_model_path() {
  if (const char* env = std::getenv("EXACTLY_MODEL"); env && *env) return env;
  return std::string(EXACTLY_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

namespace {

// vLLM's reading of --chat-template: the path of a file, or the template
// itself on the command line. Anything else is refused rather than taken as
// a template that renders the option's text.
std::string chat_template_text(const std::string& given) {
  if (given.empty()) return "";
  std::error_code ec;
  if (std::filesystem::is_regular_file(given, ec)) {
    std::string text = read_file(given);
    if (text.empty()) throw Error("--chat-template: " + given + " is empty", ExitCode::kBadInput);
    return text;
  }
  if (given.find("{{") != std::string::npos || given.find("{%") != std::string::npos) return given;
  throw Error("--chat-template: '" + given + "' is neither a file nor a Jinja template", ExitCode::kUsage);
}

}  // namespace

int ModelOptions::resolved_threads() const { return threads > 0 ? threads : ThreadPool::default_threads(); }

LoadOptions ModelOptions::load_options() const {
  LoadOptions o;
  o.device = parse_device(device);
  o.format = parse_load_format(load_format);
  o.deterministic = deterministic;
  o.cuda_graphs = !enforce_eager;
  o.chat_template = chat_template_text(chat_template);
  o.tensor_parallel_size = tensor_parallel_size;
  o.threads = resolved_threads();
  return o;
}

void add_model_options(CLI::App& cmd, ModelOptions& opts) {
  opts.model = default_model_path();
  cmd.add_option("-m,--model", opts.model, "GGUF model file")->capture_default_str();
  cmd.add_option("-t,--threads", opts.threads, "CPU threads (0: all cores)")->check(CLI::NonNegativeNumber);
  cmd.add_option("--device", opts.device, "where the model runs: cpu or cuda")->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd.add_option("--load-format", opts.load_format,
                 "auto (a GGUF file) or dummy (random weights of the shape of the config.json given as --model)")
      ->capture_default_str()->check(CLI::IsMember({"auto", "gguf", "dummy"}));
  cmd.add_flag("--enforce-eager", opts.enforce_eager, "cuda: launch every kernel from the host (no CUDA graphs)");
  cmd.add_option("--tensor-parallel-size", opts.tensor_parallel_size,
                 "cpu: split the model over this many ranks, -tp for short (heads and MLP columns divided; their "
                 "partial outputs summed in rank order)")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cmd.add_flag("--deterministic,!--no-deterministic", opts.deterministic,
               "cuda: the canonical order, on by default: a request's bits never depend on the batch; "
               "--no-deterministic trades that for the fastest kernels at each batch size");
}

void add_chat_template_option(CLI::App& cmd, ModelOptions& opts) {
  cmd.add_option("--chat-template", opts.chat_template,
                 "a Jinja chat template that replaces the model's: the path of a file, or the template itself");
}

void add_sampling_options(CLI::App& cmd, SamplingParams& p) {
  cmd.add_option("--temp", p.temperature, "sampling temperature (0: greedy)")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--top-k", p.top_k, "keep the k most likely tokens (0: off)")->capture_default_str();
  cmd.add_option("--top-p", p.top_p, "nucleus sampling mass (1: off)")->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--min-p", p.min_p, "drop tokens below min-p x the best (0: off)")->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--repeat-penalty", p.repetition_penalty, "repetition penalty (1: off)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd.add_option("--repeat-last-n", p.repetition_window, "tokens the repetition penalty looks back on")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd.add_option_function<uint64_t>("-s,--seed", [&p](const uint64_t& s) { p.seed = s; },
                                    "random seed (default: random)");
}

void add_engine_options(CLI::App& cmd, EngineConfig& c) {
  cmd.add_option_function<std::string>(
         "--kv-cache-memory",
         [&c](const std::string& text) {
           auto bytes = parse_byte_size(text);
           if (!bytes || *bytes <= 0)
             throw CLI::ValidationError("--kv-cache-memory", "'" + text + "' is not a size such as 2GiB or 512MiB");
           c.kv_cache_memory = *bytes;
         },
         "memory for the KV cache, e.g. 2GiB (default: 2GiB on the CPU; on a GPU what "
         "--gpu-memory-utilization leaves after the weights and workspace)");
  cmd.add_option("--gpu-memory-utilization", c.gpu_memory_utilization,
                 "cuda: fraction of the GPU's memory this process may use in all")
      ->capture_default_str()->check(CLI::Range(0.05, 1.0));
  cmd.add_option("--block-size", c.block_size, "token slots per KV block")->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd.add_option("--max-num-batched-tokens", c.max_num_batched_tokens, "token budget of one forward pass")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd.add_option("--max-num-seqs", c.max_num_seqs, "most sequences running at once")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd.add_flag("--no-prefix-caching{false}", c.enable_prefix_caching, "do not reuse KV of common prompt prefixes");
  cmd.add_option("--spec", c.spec_method,
                 "speculative decoding: ngram (prompt lookup), draft:PATH (a draft model with the same vocabulary), "
                 "layerskip:L (the model's first L layers draft) or head:PATH (a draft head reading the model's "
                 "hidden states, on the CPU or the GPU); off by default");
  cmd.add_option("--num-speculative-tokens", c.num_speculative_tokens, "most draft tokens per request and step")
      ->capture_default_str()->check(CLI::Range(1, 16));
  cmd.add_flag("--no-adaptive-speculation{false}", c.adaptive_speculation,
               "always draft --num-speculative-tokens tokens, whatever acceptance and step costs say");
  cmd.add_flag("--no-confident-draft-runs{false}", c.confident_draft_runs,
               "a draft model drafts as many tokens as the acceptance rate gives, not on while it is confident");
  cmd.add_option_function<std::string>(
         "--draft-kv-cache-memory",
         [&c](const std::string& text) {
           auto bytes = parse_byte_size(text);
           if (!bytes || *bytes <= 0)
             throw CLI::ValidationError("--draft-kv-cache-memory", "'" + text + "' is not a size such as 512MiB");
           c.draft_kv_cache_memory = *bytes;
         },
         "memory for the KV cache of a --spec draft:PATH model or head:PATH head, on top of --kv-cache-memory "
         "(default: a share of --kv-cache-memory that holds as many tokens as the target's)");
  cmd.add_option("--long-prefill-threshold", c.long_prefill_token_threshold,
                 "most tokens one request computes per step (0: no cap)")->capture_default_str();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(strformat("cannot open %s: %s", path.c_str(), std::strerror(errno)), ExitCode::kBadInput);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int32_t> parse_token_list(const std::string& text, const char* what) {
  std::vector<int32_t> ids;
  std::string item;
  auto flush = [&] {
    if (item.empty()) return;
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(item.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || v < 0 || v > INT32_MAX)
      throw Error(strformat("%s: '%s' is not a token id", what, item.c_str()), ExitCode::kUsage);
    ids.push_back(static_cast<int32_t>(v));
    item.clear();
  };
  for (char c : text) {
    if (c == ',' || std::isspace(static_cast<unsigned char>(c))) flush();
    else item += c;
  }
  flush();
  return ids;
}

}  // namespace exactly::cli
