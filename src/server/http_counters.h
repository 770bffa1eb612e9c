// What the HTTP side counts, for /metrics: connections and requests, and the
// connections closed for breaking a limit. Any thread updates them.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace exactly::server {

struct HttpCounters {
  std::atomic<int64_t> connections_open{0};
  std::atomic<int64_t> connections_total{0};
  std::atomic<int64_t> connections_evicted{0};  // closed while idle to make room for a new one
  std::atomic<int64_t> requests_total{0};
  std::atomic<int64_t> timeouts_total{0};       // headers, body or a write not done in time
  std::atomic<int64_t> refused_total{0};        // 4xx for the request's framing: size, headers, syntax
  std::atomic<int64_t> server_errors_total{0};  // 5xx of our own making

  // Appends the counters in Prometheus' text format.
  void render(std::string& out) const;
};

}  // namespace exactly::server
