#include "server/metrics.h"

#include <algorithm>

#include "core/format.h"

namespace exactly::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out,
                       const std::string& labels) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  const std::string lead = labels.empty() ? "" : labels + ",";
  const std::string alone = labels.empty() ? "" : "{" + labels + "}";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += strformat("%s_bucket{%sle=\"%g\"} %lld\n", name.c_str(), lead.c_str(), bounds_[i],
                     static_cast<long long>(cumulative));
  }
  out += strformat("%s_bucket{%sle=\"+Inf\"} %lld\n", name.c_str(), lead.c_str(), static_cast<long long>(count_));
  out += strformat("%s_sum%s %.9g\n%s_count%s %lld\n", name.c_str(), alone.c_str(), sum_, name.c_str(), alone.c_str(),
                   static_cast<long long>(count_));
}

namespace {

void metric(std::string& out, const char* type, const std::string& name, const std::string& help, double value) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  out += strformat("%s %.17g\n", name.c_str(), value);
}

}  // namespace

// A label value with Prometheus' escapes: backslash, double quote, newline.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string MetricsSnapshot::prometheus_text(const std::string& model_name) const {
  std::string out;
  auto d = [](auto v) { return static_cast<double>(v); };
  metric(out, "gauge", "exactly_num_requests_running", "Sequences running in the engine.", d(running));
  metric(out, "gauge", "exactly_num_requests_waiting", "Sequences waiting to be scheduled.", d(waiting));
  metric(out, "gauge", "exactly_kv_blocks_total", "KV cache blocks in the pool.", d(kv.total_blocks));
  metric(out, "gauge", "exactly_kv_blocks_used", "KV cache blocks referenced by a sequence.", d(kv.used_blocks));
  metric(out, "gauge", "exactly_kv_blocks_cached", "KV cache blocks in the prefix cache (used or free).",
         d(kv.cached_blocks));
  metric(out, "gauge", "exactly_kv_cache_usage_ratio", "Fraction of KV cache blocks in use.",
         kv.total_blocks > 0 ? d(kv.used_blocks) / d(kv.total_blocks) : 0.0);
  metric(out, "counter", "exactly_prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
         d(kv.prefix_query_tokens));
  metric(out, "counter", "exactly_prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
         d(kv.prefix_hit_tokens));
  metric(out, "gauge", "exactly_prefix_cache_hit_rate", "Prefix cache hits over queries, in tokens.",
         kv.prefix_query_tokens > 0 ? d(kv.prefix_hit_tokens) / d(kv.prefix_query_tokens) : 0.0);
  metric(out, "counter", "exactly_num_preemptions_total", "Sequences preempted to free KV blocks.",
         d(engine.preemptions));
  metric(out, "counter", "exactly_prompt_tokens_total", "Prompt tokens of finished requests, cached ones included.",
         d(prompt_tokens));
  metric(out, "counter", "exactly_prompt_tokens_computed_total", "Prompt tokens run through the model.",
         d(engine.prompt_tokens_computed));
  metric(out, "counter", "exactly_generation_tokens_total", "Tokens generated.", d(engine.generated_tokens));
  metric(out, "counter", "exactly_engine_steps_total", "Engine iterations.", d(engine.steps));
  metric(out, "counter", "exactly_engine_step_seconds_total", "Seconds of engine iterations that ran the model.",
         engine.step_seconds);
  metric(out, "counter", "exactly_engine_forward_seconds_total",
         "Seconds of those iterations in the forward pass (the host's work around it excluded).",
         engine.forward_seconds);
  metric(out, "counter", "exactly_grammar_masks_total", "Grammar masks filled.", d(engine.grammar_masks));
  metric(out, "counter", "exactly_grammar_mask_seconds_total", "Seconds the mask threads spent filling them.",
         engine.grammar_mask_seconds);
  metric(out, "counter", "exactly_grammar_mask_wait_seconds_total",
         "Seconds engine iterations waited for masks the forward pass did not hide.",
         engine.grammar_mask_wait_seconds);
  metric(out, "counter", "exactly_spec_decode_num_draft_tokens_total", "Speculative draft tokens verified.",
         d(engine.spec_drafted_tokens));
  metric(out, "counter", "exactly_spec_decode_num_accepted_tokens_total", "Speculative draft tokens accepted.",
         d(engine.spec_accepted_tokens));
  metric(out, "counter", "exactly_spec_decode_num_probe_draft_tokens_total",
         "Prompt lookups verified to measure the verify cost of a model proposer (not counted above).",
         d(engine.spec_probe_drafted_tokens));
  metric(out, "gauge", "exactly_spec_decode_acceptance_rate", "Accepted over drafted tokens.",
         engine.spec_drafted_tokens > 0 ? d(engine.spec_accepted_tokens) / d(engine.spec_drafted_tokens) : 0.0);
  metric(out, "gauge", "exactly_spec_decode_mean_accepted_length", "Accepted drafts per verify.",
         engine.spec_verifies > 0 ? d(engine.spec_accepted_tokens) / d(engine.spec_verifies) : 0.0);
  out += "# HELP exactly_request_success_total Finished requests by finish reason.\n"
         "# TYPE exactly_request_success_total counter\n";
  out += strformat("exactly_request_success_total{finished_reason=\"stop\"} %lld\n", static_cast<long long>(requests_stop));
  out += strformat("exactly_request_success_total{finished_reason=\"length\"} %lld\n", static_cast<long long>(requests_length));
  out += strformat("exactly_request_success_total{finished_reason=\"abort\"} %lld\n", static_cast<long long>(requests_abort));
  time_to_first_token.render("exactly_time_to_first_token_seconds", "Seconds from arrival to the first token.", out);
  inter_token_latency.render("exactly_inter_token_latency_seconds", "Seconds between a request's token outputs.", out);
  e2e_latency.render("exactly_e2e_request_latency_seconds", "Seconds from arrival to finish.", out);
  queue_time.render("exactly_request_queue_time_seconds", "Seconds from arrival to first scheduling.", out);
  prefill_time.render("exactly_request_prefill_time_seconds", "Seconds from first scheduling to the first token.", out);
  decode_time.render("exactly_request_decode_time_seconds", "Seconds from the first token to finish.", out);

  const std::string label = "model_name=\"" + label_value(model_name) + "\"";
  auto vllm = [&](const char* type, const std::string& name, const std::string& help, double value) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    out += strformat("%s{%s} %.17g\n", name.c_str(), label.c_str(), value);
  };
  vllm("gauge", "vllm:num_requests_running", "Requests in the engine's running batch.", d(running));
  vllm("gauge", "vllm:num_requests_waiting", "Requests waiting to be scheduled.", d(waiting));
  vllm("gauge", "vllm:kv_cache_usage_perc", "KV cache usage; 1 means 100 percent.",
       kv.total_blocks > 0 ? d(kv.used_blocks) / d(kv.total_blocks) : 0.0);
  vllm("counter", "vllm:num_preemptions_total", "Preemptions.", d(engine.preemptions));
  vllm("counter", "vllm:prompt_tokens_total", "Prompt tokens processed.", d(prompt_tokens));
  vllm("counter", "vllm:generation_tokens_total", "Generation tokens processed.", d(engine.generated_tokens));
  out += "# HELP vllm:request_success_total Finished requests by finish reason.\n"
         "# TYPE vllm:request_success_total counter\n";
  for (const auto& [reason, count] : {std::pair{"stop", requests_stop}, {"length", requests_length},
                                      {"abort", requests_abort}})
    out += strformat("vllm:request_success_total{%s,finished_reason=\"%s\"} %lld\n", label.c_str(), reason,
                     static_cast<long long>(count));
  time_to_first_token.render("vllm:time_to_first_token_seconds", "Time to first token in seconds.", out, label);
  inter_token_latency.render("vllm:inter_token_latency_seconds", "Inter-token latency in seconds.", out, label);
  inter_token_latency.render("vllm:time_per_output_token_seconds", "Time per output token in seconds.", out, label);
  e2e_latency.render("vllm:e2e_request_latency_seconds", "End-to-end request latency in seconds.", out, label);
  queue_time.render("vllm:request_queue_time_seconds", "Time spent waiting in the queue in seconds.", out, label);
  prefill_time.render("vllm:request_prefill_time_seconds", "Time spent in the prefill phase in seconds.", out, label);
  decode_time.render("vllm:request_decode_time_seconds", "Time spent in the decode phase in seconds.", out, label);
  return out;
}

void MetricsBoard::publish(const MetricsSnapshot& snapshot) {
  std::lock_guard lock(mutex_);
  snapshot_ = snapshot;
}

MetricsSnapshot MetricsBoard::read() const {
  std::lock_guard lock(mutex_);
  return snapshot_;
}

}  // namespace exactly::server
