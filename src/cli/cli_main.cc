#include "cli/cli_main.h"

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

namespace exactly::cli {

int run_cli(int argc, const char* const* argv) {
  CLI::App app{"exactly: LLM inference whose optimisations never change what the model computes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "exactly 0.1.0");
  register_run(app);
  register_chat(app);
  register_tokenize(app);
  register_perplexity(app);
  register_info(app);
  register_bench(app);
  register_logits(app);
  register_batch(app);
  register_serve(app);
  register_export(app);
  register_verify(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : static_cast<int>(ExitCode::kUsage);
  } catch (const Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return static_cast<int>(ExitCode::kRuntime);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace exactly::cli
