// `exactly bench kv`: how many requests fit in a KV memory budget, and how
// much of the allocated KV holds live tokens, for a workload file, under
// paged allocation and under contiguous reservation (bench_tools/kv_capacity.h).
#include "bench_tools/kv_capacity.h"
#include "bench_tools/kv_capacity_report.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "engine/loaded_model.h"
#include "kvcache/capacity.h"
#include "model/kv_storage.h"

namespace exactly::cli {

using namespace bench_tools;

namespace {

struct BenchKVOptions {
  ModelOptions model;
  std::string workload;
  std::string memory = "256MiB";
  int block_size = 16;
  int reserve_len = 2048;
  std::string json_out;
};

void run(const BenchKVOptions& o) {
  LoadedModel m = load_model(o.model.model, false, o.model.load_options());
  const int64_t bytes_per_slot = KVStorage::bytes_per_slot(m.config());
  auto memory = parse_byte_size(o.memory);
  if (!memory) throw Error("--kv-cache-memory: '" + o.memory + "' is not a size", ExitCode::kUsage);
  const std::vector<KVWorkItem> work = read_kv_workload(o.workload);
  const int64_t max_len = o.reserve_len;
  const KVPolicyResult paged = simulate_kv_policy("paged", work, *memory, bytes_per_slot, o.block_size, max_len);
  const KVPolicyResult reserve = simulate_kv_policy("reserve", work, *memory, bytes_per_slot, o.reserve_len, max_len);
  print_kv_capacity(o.memory, bytes_per_slot, work.size(), paged, reserve);
  if (!o.json_out.empty()) write_kv_capacity_json(o.json_out, paged, reserve);
}

}  // namespace

void register_bench_kv(CLI::App& bench) {
  auto o = std::make_shared<BenchKVOptions>();
  CLI::App* cmd = bench.add_subcommand("kv", "KV memory use of paged allocation vs contiguous reservation");
  add_model_options(*cmd, o->model);
  cmd->add_option("--workload", o->workload, "JSONL of {prompt: [ids], max_tokens} (bench/make_workload.py)")
      ->required();
  cmd->add_option("--kv-cache-memory", o->memory, "KV memory budget")->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "paged block size")->capture_default_str();
  cmd->add_option("--reserve-len", o->reserve_len, "slots each request reserves under the reserve policy")
      ->capture_default_str();
  cmd->add_option("--json", o->json_out, "write results as JSON");
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
