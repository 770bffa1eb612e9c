// Each subcommand lives in its own cmd_<name>.cc and registers itself on the
// root CLI11 app. A registered callback runs after parsing; it throws
// exactly::Error for user-facing failures (main turns them into exit codes).
#pragma once

#include <CLI/CLI.hpp>

namespace exactly::cli {

void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_info(CLI::App& app);
void register_bench(CLI::App& app);
void register_logits(CLI::App& app);
void register_batch(CLI::App& app);
void register_serve(CLI::App& app);
void register_export(CLI::App& app);
void register_verify(CLI::App& app);
void register_bench_kv(CLI::App& bench);  // under `bench`
void register_bench_serve(CLI::App& bench);  // under `bench`
void register_bench_throughput(CLI::App& bench);  // under `bench`
void register_bench_spec_cost(CLI::App& bench);  // under `bench`
void register_bench_grammar(CLI::App& bench);    // under `bench`

// models/SmolLM2-135M-Instruct.Q4_1.gguf next to the executable's source tree,
// or $EXACTLY_MODEL when set.
std::string default_model_path();

}  // namespace exactly::cli
