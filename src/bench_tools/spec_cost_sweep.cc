#include "bench_tools/spec_cost_sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench_tools/verify_step_timer.h"
#include "core/format.h"

namespace exactly::bench_tools {

double tokens_per_step(double a, int k) { return (1 - std::pow(a, k + 1)) / (1 - a); }

namespace {

void print_table_head(const std::vector<std::string>& columns) {
  std::printf("| batch |");
  for (const std::string& c : columns) std::printf(" %s |", c.c_str());
  std::printf("\n| ---: |");
  for (size_t i = 0; i < columns.size(); ++i) std::printf(" ---: |");
  std::printf("\n");
}

// [batch sizes][k]: milliseconds of a step, each printed as it is measured.
std::vector<std::vector<double>> time_steps(VerifyStepTimer& timer, const SpecCostSetup& setup) {
  std::vector<std::string> columns;
  for (int k = 0; k <= setup.max_drafts; ++k) columns.push_back(strformat("k=%d", k));
  print_table_head(columns);
  std::vector<std::vector<double>> times;
  for (int batch : setup.batch_sizes) {
    std::vector<double> t;
    std::printf("| %d |", batch);
    for (int k = 0; k <= setup.max_drafts; ++k) {
      t.push_back(timer.step_ms(batch, k, setup.repetitions));
      std::printf(" %.3f |", t.back());
      std::fflush(stdout);
    }
    std::printf("\n");
    times.push_back(t);
  }
  return times;
}

// Prints the speedup table; returns each batch size's JSON entry.
nlohmann::json price_speedups(const std::vector<std::vector<double>>& times, const SpecCostSetup& setup) {
  std::printf("\nSpeedup over plain decoding with free drafts (best k in brackets):\n");
  std::vector<std::string> columns;
  for (double a : setup.acceptance) columns.push_back(strformat("acceptance %.2f", a));
  print_table_head(columns);
  nlohmann::json results = nlohmann::json::array();
  for (size_t b = 0; b < times.size(); ++b) {
    const std::vector<double>& t = times[b];
    nlohmann::json row = {{"batch", setup.batch_sizes[b]}, {"step_ms", t}, {"speedup", nlohmann::json::array()}};
    std::printf("| %d |", setup.batch_sizes[b]);
    for (double a : setup.acceptance) {
      double best = 1.0;
      int best_k = 0;
      for (int k = 1; k <= setup.max_drafts; ++k) {
        const double s = tokens_per_step(a, k) * t[0] / t[static_cast<size_t>(k)];
        if (s > best) best = s, best_k = k;
      }
      std::printf(" %.2fx (%d) |", best, best_k);
      row["speedup"].push_back({{"acceptance", a}, {"speedup", best}, {"k", best_k}});
    }
    std::printf("\n");
    results.push_back(row);
  }
  return results;
}

}  // namespace

nlohmann::json run_spec_cost_sweep(LoadedModel& m, const std::string& model_name, const SpecCostSetup& setup) {
  const int max_batch = *std::max_element(setup.batch_sizes.begin(), setup.batch_sizes.end());
  VerifyStepTimer timer(m, max_batch, setup.context, setup.max_drafts);
  std::printf("%s on %s: a step of 1 + k tokens per sequence at %d tokens of context, ms (median of %d)\n",
              model_name.c_str(), m.model->device(), setup.context, setup.repetitions);
  const std::vector<std::vector<double>> times = time_steps(timer, setup);
  nlohmann::json results = price_speedups(times, setup);
  return {{"model", model_name},
          {"device", m.model->device()},
          {"context", setup.context},
          {"repetitions", setup.repetitions},
          {"results", std::move(results)}};
}

}  // namespace exactly::bench_tools
