// The `exactly` command line: one executable, one subcommand per file.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"exactly: LLM inference whose optimisations never change what the model computes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "exactly 0.1.0");
  exactly::cli::register_run(app);
  exactly::cli::register_chat(app);
  exactly::cli::register_tokenize(app);
  exactly::cli::register_perplexity(app);
  exactly::cli::register_info(app);
  exactly::cli::register_bench(app);
  exactly::cli::register_logits(app);
  exactly::cli::register_batch(app);
  exactly::cli::register_serve(app);
  exactly::cli::register_export(app);
  exactly::cli::register_verify(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : static_cast<int>(exactly::ExitCode::kUsage);
  } catch (const exactly::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return static_cast<int>(exactly::ExitCode::kRuntime);
  }
  return 0;
}
