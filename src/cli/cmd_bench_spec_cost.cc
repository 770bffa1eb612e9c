// `exactly bench spec-cost`: what a verify step costs, and the speedup that
// speculation would give at a given acceptance rate with that cost
// (bench_tools/spec_cost_sweep.h).
#include <fstream>

#include "bench_tools/spec_cost_sweep.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/loaded_model.h"

namespace exactly::cli {

using namespace bench_tools;

namespace {

constexpr int kMaxDraftsBound = 16;
constexpr int kMaxBatchBound = 1024;

struct SpecCostOptions {
  ModelOptions model;
  SpecCostSetup setup{
      .batch_sizes = {1, 4, 16, 64}, .context = 512, .max_drafts = 8, .repetitions = 5, .acceptance = {0.6, 0.7, 0.8}};
  std::string json_out;
};

void check_options(const SpecCostSetup& s) {
  for (int b : s.batch_sizes)
    if (b < 1 || b > kMaxBatchBound)
      throw Error(strformat("--batch-sizes: %d is not between 1 and %d", b, kMaxBatchBound), ExitCode::kUsage);
  if (s.max_drafts < 1 || s.max_drafts > kMaxDraftsBound)
    throw Error(strformat("--max-drafts must be between 1 and %d", kMaxDraftsBound), ExitCode::kUsage);
  if (s.context < 1 || s.context > 1 << 20) throw Error("--context must be between 1 and 1048576", ExitCode::kUsage);
  for (double a : s.acceptance)
    if (!(a > 0 && a < 1)) throw Error(strformat("--acceptance: %g is not inside (0, 1)", a), ExitCode::kUsage);
}

void run(const SpecCostOptions& o) {
  check_options(o.setup);
  LoadedModel m = load_model(o.model.model, true, o.model.load_options());
  const std::string name = m.config().name.empty() ? o.model.model : m.config().name;
  const nlohmann::json report = run_spec_cost_sweep(m, name, o.setup);
  if (!o.json_out.empty()) std::ofstream(o.json_out) << report.dump(2) << '\n';
}

}  // namespace

void register_bench_spec_cost(CLI::App& bench) {
  auto o = std::make_shared<SpecCostOptions>();
  SpecCostSetup& s = o->setup;
  CLI::App* cmd = bench.add_subcommand(
      "spec-cost", "the cost of a verify step of 1 + k tokens, and the speedup it allows at given acceptance rates");
  add_model_options(*cmd, o->model);
  cmd->add_option("--batch-sizes", s.batch_sizes, "sequences per step")->delimiter(',')->capture_default_str();
  cmd->add_option("--context", s.context, "tokens of KV each sequence holds")->capture_default_str();
  cmd->add_option("--max-drafts", s.max_drafts, "measure k = 0 .. this many drafts")->capture_default_str();
  cmd->add_option("-r,--repetitions", s.repetitions, "timed steps per cell")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--acceptance", s.acceptance, "acceptance rates to price")->delimiter(',')->capture_default_str();
  cmd->add_option("--json", o->json_out, "write results as JSON");
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
