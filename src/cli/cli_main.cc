#include "cli/cli_main.h"

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

namespace exactly::cli {

namespace {

// vLLM's two-letter short option, which CLI11 cannot declare: -tp N (or
// -tp=N) is read as --tensor-parallel-size.
std::vector<std::string> with_long_names(int argc, const char* const* argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a == "-tp") a = "--tensor-parallel-size";
    else if (a.rfind("-tp=", 0) == 0) a = "--tensor-parallel-size=" + a.substr(4);
  }
  return args;
}

}  // namespace

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
    const std::vector<std::string> args = with_long_names(argc, argv);
    std::vector<const char*> arg_pointers;
    for (const std::string& a : args) arg_pointers.push_back(a.c_str());
    app.parse(argc, arg_pointers.data());
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
