// Options shared by the subcommands that load a model and generate.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine_config.h"
#include "engine/loaded_model.h"
#include "sample/sampling_params.h"

namespace exactly::cli {

struct ModelOptions {
  std::string model;  // path of the GGUF file
  int threads = 0;    // 0: all hardware threads
  std::string device = "cpu";
  std::string load_format = "auto";
  bool deterministic = true;
  bool enforce_eager = false;
  std::string chat_template;  // --chat-template as given: a file, or the template itself
  int tensor_parallel_size = 1;
  int resolved_threads() const;
  LoadOptions load_options() const;
};

void add_model_options(CLI::App& cmd, ModelOptions& opts);

// --chat-template, for the commands that render chat messages.
void add_chat_template_option(CLI::App& cmd, ModelOptions& opts);

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed
void add_sampling_options(CLI::App& cmd, SamplingParams& params);

// --kv-cache-memory, --block-size, --max-num-batched-tokens, --max-num-seqs,
// --no-prefix-caching (shared by run, batch and serve).
void add_engine_options(CLI::App& cmd, EngineConfig& config);

// Reads a whole file as bytes; throws Error(kBadInput) naming the file.
std::string read_file(const std::string& path);

// "1,2,3" or whitespace-separated ids; throws Error(kUsage) naming the bad item.
std::vector<int32_t> parse_token_list(const std::string& text, const char* what);

}  // namespace exactly::cli
