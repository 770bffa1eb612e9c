// `exactly bench throughput`: offline batch generation through the engine,
// tokens per second and time per decode step against its floor, per batch
// size (bench_tools/throughput_runner.h, throughput_report.h).
#include <fstream>

#include "bench_tools/throughput_report.h"
#include "bench_tools/throughput_runner.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/engine.h"

namespace exactly::cli {

using namespace bench_tools;

namespace {

struct ThroughputOptions {
  ModelOptions model;
  EngineConfig engine;
  ThroughputSetup setup{.batch_sizes = {1, 8, 32}, .input_len = 512, .output_len = 128, .repetitions = 3};
  std::string json_out;
  std::string step_trace;  // one CSV row per engine step of each batch size's last run
};

void run(ThroughputOptions& o) {
  const ThroughputSetup& s = o.setup;
  if (s.input_len < 1 || s.output_len < 2)
    throw Error("--input-len must be >= 1 and --output-len >= 2", ExitCode::kUsage);
  std::ofstream trace;
  if (!o.step_trace.empty()) {
    trace.open(o.step_trace);
    if (!trace) throw Error(strformat("cannot write the step trace %s", o.step_trace.c_str()), ExitCode::kUsage);
    write_step_trace_header(trace);
  }
  LoadedModel m = load_model(o.model.model, false, o.model.load_options());
  o.engine.threads = o.model.threads;
  adapt_engine_config(o.engine, s);
  Engine engine(m, o.engine);
  const nlohmann::json report = run_throughput(m, engine, s, trace.is_open() ? &trace : nullptr);
  if (!o.json_out.empty()) std::ofstream(o.json_out) << report.dump(2) << '\n';
}

}  // namespace

void register_bench_throughput(CLI::App& bench) {
  auto o = std::make_shared<ThroughputOptions>();
  ThroughputSetup& s = o->setup;
  CLI::App* cmd = bench.add_subcommand("throughput", "offline batch generation: tokens/s and time per decode step");
  add_model_options(*cmd, o->model);
  add_engine_options(*cmd, o->engine);
  cmd->add_option("--batch-sizes", s.batch_sizes, "requests submitted at once")->delimiter(',')->capture_default_str();
  cmd->add_option("--input-len", s.input_len, "prompt tokens per request")->capture_default_str();
  cmd->add_option("--output-len", s.output_len, "generated tokens per request")->capture_default_str();
  cmd->add_option("-r,--repetitions", s.repetitions, "runs of each batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--bandwidth", s.bandwidth_gbs, "memory bandwidth in GB/s for the per-step floor (H200: 4220)");
  cmd->add_option("--temperature", s.temperature, "sample at this temperature (0: greedy)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--json", o->json_out, "write results as JSON");
  cmd->add_option("--step-trace", o->step_trace,
                  "write one CSV row per engine step of each batch size's last run (wall and forward ms, tokens)");
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
