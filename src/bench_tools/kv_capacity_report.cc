#include "bench_tools/kv_capacity_report.h"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/format.h"

namespace exactly::bench_tools {

void print_kv_capacity(const std::string& memory_text, int64_t bytes_per_slot, size_t num_requests,
                       const KVPolicyResult& paged, const KVPolicyResult& reserve) {
  std::printf("KV memory %s (%s per token slot), %zu requests\n", memory_text.c_str(),
              human_bytes(static_cast<double>(bytes_per_slot)).c_str(), num_requests);
  std::printf("| policy | block | blocks | steps | mean running | peak running | live/allocated | preemptions |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const KVPolicyResult* r : {&paged, &reserve})
    std::printf("| %s | %d | %d | %lld | %.1f | %lld | %.1f%% | %lld |\n", r->policy.c_str(), r->block_size, r->blocks,
                static_cast<long long>(r->steps), r->mean_running, static_cast<long long>(r->peak_running),
                100 * r->live_fraction, static_cast<long long>(r->preemptions));
  std::printf("requests at once, paged / reserve: %.2fx (mean), %.2fx (peak)\n",
              paged.mean_running / reserve.mean_running,
              static_cast<double>(paged.peak_running) / static_cast<double>(reserve.peak_running));
}

void write_kv_capacity_json(const std::string& path, const KVPolicyResult& paged, const KVPolicyResult& reserve) {
  nlohmann::json j = nlohmann::json::array();
  for (const KVPolicyResult* r : {&paged, &reserve})
    j.push_back({{"policy", r->policy},
                 {"block_size", r->block_size},
                 {"blocks", r->blocks},
                 {"steps", r->steps},
                 {"mean_running", r->mean_running},
                 {"peak_running", r->peak_running},
                 {"live_fraction", r->live_fraction},
                 {"preemptions", r->preemptions}});
  std::ofstream(path) << j.dump(2) << '\n';
}

}  // namespace exactly::bench_tools
