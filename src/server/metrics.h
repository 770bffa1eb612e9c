// Server metrics in Prometheus' text format. The engine thread gathers them
// into a MetricsSnapshot after each iteration and publishes it; HTTP threads
// only ever read the published copy, under its mutex.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace exactly::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines of metric `name`.
  // `labels` (e.g. `model_name="m"`) go on every line.
  void render(const std::string& name, const std::string& help, std::string& out,
              const std::string& labels = "") const;

 private:
  std::vector<double> bounds_;   // [n_buckets] upper bounds, increasing; +Inf is implicit
  std::vector<int64_t> counts_;  // [n_buckets + 1] observations per bucket (not cumulative)
  double sum_ = 0;
  int64_t count_ = 0;
};

struct MetricsSnapshot {
  size_t running = 0;
  size_t waiting = 0;
  KVCacheStats kv;
  EngineStats engine;
  int64_t prompt_tokens = 0;  // of finished requests, cached ones included
  int64_t requests_stop = 0, requests_length = 0, requests_abort = 0;
  Histogram time_to_first_token{{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                                 7.5, 10.0, 20.0, 40.0, 80.0}};
  Histogram inter_token_latency{{0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
                                 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0}};
  // A finished request's phases: arrival to finish, to its first
  // scheduling (queue), from there to its first token (prefill), and from
  // that to its finish (decode). Buckets as vLLM's.
  Histogram e2e_latency{kPhaseBuckets};
  Histogram queue_time{kPhaseBuckets};
  Histogram prefill_time{kPhaseBuckets};
  Histogram decode_time{kPhaseBuckets};

  static inline const std::vector<double> kPhaseBuckets{0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,  10.0, 15.0,
                                                        20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0,
                                                        7680.0};

  // Ours (exactly_*) and, for dashboards and autoscalers made for vLLM, the
  // same quantities under vLLM's names (vllm:*) labelled with `model_name`.
  std::string prometheus_text(const std::string& model_name) const;
};

class MetricsBoard {
 public:
  void publish(const MetricsSnapshot& snapshot);
  MetricsSnapshot read() const;

 private:
  mutable std::mutex mutex_;
  MetricsSnapshot snapshot_;
};

}  // namespace exactly::server
