#include "bench_tools/throughput_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "bench_tools/timing.h"
#include "core/format.h"

namespace exactly::bench_tools {

void BatchRuns::add(int batch, const ThroughputSetup& setup, const ThroughputRun& run) {
  e2e.push_back(static_cast<double>(batch) * setup.output_len / run.total_s);
  decode.push_back(static_cast<double>(run.decode_tokens) / run.decode_s);
  step_ms.push_back(1e3 * run.decode_s / static_cast<double>(std::max<int64_t>(1, run.decode_steps)));
  forward_ms.push_back(run.forward_ms);
}

void print_throughput_header(const LoadedModel& m, const Engine& engine, const ThroughputSetup& setup) {
  const ModelConfig& c = m.config();
  std::printf("model %s on %s: %s of weights per pass, %s of KV per token; KV pool %lld blocks of %d\n", c.name.c_str(),
              m.model->device(), human_bytes(static_cast<double>(m.model->weight_bytes())).c_str(),
              human_bytes(static_cast<double>(m.model->kv_bytes_per_slot())).c_str(),
              static_cast<long long>(engine.kv_stats().total_blocks), engine.config().block_size);
  const std::string sampling =
      setup.temperature > 0
          ? strformat("sampled at temperature %g (top-k 40, top-p 0.95, min-p 0.05)", setup.temperature)
          : std::string("greedy");
  std::printf("input %d, output %d tokens, %s, EOS ignored; medians of %d runs\n", setup.input_len, setup.output_len,
              sampling.c_str(), setup.repetitions);
  std::printf(
      "| batch | tokens/s (end to end) | decode tokens/s | ms per decode step | of which forward | floor ms | floor / "
      "step |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
}

double StepWeights::read_by(int batch) const {
  if (n_experts == 0) return static_cast<double>(weight_bytes);
  const double missed = std::pow(1.0 - static_cast<double>(experts_used) / n_experts, batch);
  return static_cast<double>(weight_bytes - expert_bytes) + static_cast<double>(expert_bytes) * (1.0 - missed);
}

// The experts' share as the GPU holds them (bf16: gate, up and down of each).
StepWeights step_weights(const LoadedModel& m) {
  const ModelConfig& c = m.config();
  StepWeights w{m.model->weight_bytes(), 0, c.n_experts, c.n_experts_used};
  if (c.n_experts > 0)
    w.expert_bytes = std::min<int64_t>(
        w.weight_bytes, int64_t{c.n_layers} * c.n_experts * 3 * int64_t{c.expert_ffn_dim} * c.dim * 2);
  return w;
}

nlohmann::json report_batch(int batch, const BatchRuns& runs, const ThroughputSetup& setup, const StepWeights& weights,
                            int64_t kv_slot_bytes) {
  // A decode step reads the weights once (of experts, those chosen) and the
  // KV of each running sequence, at its mean context length over the decode phase.
  const double mean_ctx = setup.input_len + setup.output_len / 2.0;
  const double step_bytes = weights.read_by(batch) + batch * mean_ctx * static_cast<double>(kv_slot_bytes);
  const double floor_ms = setup.bandwidth_gbs > 0 ? step_bytes / (setup.bandwidth_gbs * 1e9) * 1e3 : 0;
  const double ms = upper_median(runs.step_ms);
  std::printf("| %d | %.1f | %.1f | %.3f | %.3f | %.3f | %.0f%% |\n", batch, upper_median(runs.e2e),
              upper_median(runs.decode), ms, upper_median(runs.forward_ms), floor_ms,
              floor_ms > 0 ? 100 * floor_ms / ms : 0.0);
  std::fflush(stdout);
  return {{"batch", batch},
          {"tokens_per_second", upper_median(runs.e2e)},
          {"decode_tokens_per_second", upper_median(runs.decode)},
          {"ms_per_decode_step", ms},
          {"forward_ms_per_decode_step", upper_median(runs.forward_ms)},
          {"floor_ms", floor_ms},
          {"step_bytes", step_bytes},
          {"runs_tokens_per_second", runs.e2e},
          {"runs_decode_tokens_per_second", runs.decode}};
}

nlohmann::json throughput_json(const LoadedModel& m, const ThroughputSetup& setup, nlohmann::json results) {
  return {{"model", m.config().name},
          {"device", m.model->device()},
          {"input_len", setup.input_len},
          {"output_len", setup.output_len},
          {"temperature", setup.temperature},
          {"weight_bytes", m.model->weight_bytes()},
          {"kv_bytes_per_token", m.model->kv_bytes_per_slot()},
          {"results", std::move(results)}};
}

void write_step_trace_header(std::ostream& out) { out << "batch,step,ms,forward_ms,prompt_tokens,generated,running\n"; }

void write_step_trace(std::ostream& out, int batch, const std::vector<StepRecord>& steps) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepRecord& t = steps[i];
    out << batch << ',' << i << ',' << t.ms << ',' << t.forward_ms << ',' << t.prompt_tokens << ',' << t.generated
        << ',' << t.running << '\n';
  }
}

}  // namespace exactly::bench_tools
