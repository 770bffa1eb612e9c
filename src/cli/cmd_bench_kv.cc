// `exactly bench kv`: how many requests fit in a KV memory budget, and how
// much of the allocated KV holds live tokens, for a workload file — with the
// model replaced by a stand-in that samples a fixed token, since only the
// block bookkeeping matters here. The real scheduler and block manager run.
//
// Two policies over the same memory:
//   paged    blocks of --block-size tokens allocated as sequences grow;
//   reserve  each request reserves --reserve-len contiguous slots up front, as
//            systems without paging must (one block of that size per request).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/loaded_model.h"
#include "kvcache/capacity.h"
#include "model/kv_storage.h"
#include "sched/scheduler.h"

namespace exactly::cli {

namespace {

struct BenchKVOptions {
  ModelOptions model;
  std::string workload;
  std::string memory = "256MiB";
  int block_size = 16;
  int reserve_len = 2048;
  std::string json_out;
};

struct PolicyResult {
  std::string policy;
  int32_t blocks = 0;
  int32_t block_size = 0;
  int64_t steps = 0;
  double mean_running = 0;
  int64_t peak_running = 0;
  double live_fraction = 0;  // live tokens / allocated slots, averaged over steps weighted by slots
  int64_t preemptions = 0;
};

PolicyResult simulate(const std::string& name, const std::vector<std::pair<std::vector<int32_t>, int64_t>>& work,
                      int64_t memory, int64_t bytes_per_slot, int32_t block_size, int64_t max_len) {
  const int32_t blocks = num_blocks_for_memory(memory, bytes_per_slot, block_size);
  if (blocks < 1) throw Error(strformat("%s: the memory holds no block of %d tokens", name.c_str(), block_size));
  KVCacheManager kv(blocks, block_size, false);
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 2048;
  sc.max_num_seqs = 1 << 20;  // memory, not a sequence cap, limits concurrency here
  sc.enable_prefix_caching = false;
  sc.max_model_len = max_len;
  Scheduler sched(kv, sc);
  for (size_t i = 0; i < work.size(); ++i) {
    if (!sched.fits_alone(static_cast<int64_t>(work[i].first.size()) + work[i].second))
      throw Error(strformat("%s: request %zu does not fit the memory alone", name.c_str(), i));
    sched.add_request(make_request(static_cast<RequestId>(i + 1), work[i].first, work[i].second));
  }
  PolicyResult r{name, blocks, block_size, 0, 0, 0, 0, 0};
  double running_sum = 0, live = 0, slots = 0;
  while (sched.has_unfinished()) {
    SchedulerOutput out = sched.schedule();
    r.preemptions += static_cast<int64_t>(out.preempted.size());
    std::vector<StepTokens> tokens;
    for (const ScheduledChunk& c : out.scheduled)
      if (c.samples) tokens.push_back({c.id, {5}, false});
    sched.update_after_step(out, tokens);
    // Live tokens: those whose KV is in the cache, over the slots allocated.
    int64_t live_now = 0;
    for (const ScheduledChunk& c : out.scheduled) live_now += c.first_new_token + c.num_new_tokens;
    const KVCacheStats st = kv.stats();
    ++r.steps;
    running_sum += static_cast<double>(out.scheduled.size());
    r.peak_running = std::max<int64_t>(r.peak_running, static_cast<int64_t>(out.scheduled.size()));
    live += static_cast<double>(live_now);
    slots += static_cast<double>(st.used_slots);
  }
  r.mean_running = running_sum / static_cast<double>(std::max<int64_t>(1, r.steps));
  r.live_fraction = slots > 0 ? live / slots : 0;
  return r;
}

void run(const BenchKVOptions& o) {
  LoadedModel m = load_model(o.model.model, false, o.model.load_options());
  const int64_t bytes_per_slot = KVStorage::bytes_per_slot(m.config());
  auto memory = parse_byte_size(o.memory);
  if (!memory) throw Error("--kv-cache-memory: '" + o.memory + "' is not a size", ExitCode::kUsage);
  std::ifstream in(o.workload);
  if (!in) throw Error(strformat("cannot open %s", o.workload.c_str()), ExitCode::kBadInput);
  std::vector<std::pair<std::vector<int32_t>, int64_t>> work;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("prompt") || !j["prompt"].is_array() || !j.contains("max_tokens"))
      throw Error(strformat("%s:%zu: expected {\"prompt\": [ids], \"max_tokens\": n}", o.workload.c_str(), n),
                  ExitCode::kBadInput);
    work.push_back({j["prompt"].get<std::vector<int32_t>>(), j["max_tokens"].get<int64_t>()});
  }
  const int64_t max_len = o.reserve_len;
  PolicyResult paged = simulate("paged", work, *memory, bytes_per_slot, o.block_size, max_len);
  PolicyResult reserve = simulate("reserve", work, *memory, bytes_per_slot, o.reserve_len, max_len);
  std::printf("KV memory %s (%s per token slot), %zu requests\n", o.memory.c_str(),
              human_bytes(static_cast<double>(bytes_per_slot)).c_str(), work.size());
  std::printf("| policy | block | blocks | steps | mean running | peak running | live/allocated | preemptions |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const PolicyResult* r : {&paged, &reserve})
    std::printf("| %s | %d | %d | %lld | %.1f | %lld | %.1f%% | %lld |\n", r->policy.c_str(), r->block_size, r->blocks,
                static_cast<long long>(r->steps), r->mean_running, static_cast<long long>(r->peak_running),
                100 * r->live_fraction, static_cast<long long>(r->preemptions));
  std::printf("requests at once, paged / reserve: %.2fx (mean), %.2fx (peak)\n", paged.mean_running / reserve.mean_running,
              static_cast<double>(paged.peak_running) / static_cast<double>(reserve.peak_running));
  if (!o.json_out.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const PolicyResult* r : {&paged, &reserve})
      j.push_back({{"policy", r->policy}, {"block_size", r->block_size}, {"blocks", r->blocks}, {"steps", r->steps},
                   {"mean_running", r->mean_running}, {"peak_running", r->peak_running},
                   {"live_fraction", r->live_fraction}, {"preemptions", r->preemptions}});
    std::ofstream(o.json_out) << j.dump(2) << '\n';
  }
}

}  // namespace

void register_bench_kv(CLI::App& bench) {
  auto o = std::make_shared<BenchKVOptions>();
  CLI::App* cmd = bench.add_subcommand("kv", "KV memory use of paged allocation vs contiguous reservation");
  add_model_options(*cmd, o->model);
  cmd->add_option("--workload", o->workload, "JSONL of {prompt: [ids], max_tokens} (bench/make_workload.py)")->required();
  cmd->add_option("--kv-cache-memory", o->memory, "KV memory budget")->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "paged block size")->capture_default_str();
  cmd->add_option("--reserve-len", o->reserve_len, "slots each request reserves under the reserve policy")
      ->capture_default_str();
  cmd->add_option("--json", o->json_out, "write results as JSON");
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
