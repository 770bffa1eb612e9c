// One streaming completions request against an OpenAI-compatible server,
// timed chunk by chunk. Every failure (refused connection, HTTP error status,
// malformed or error chunk, truncated stream, timeout) becomes a failed
// outcome with its reason; nothing here throws for a bad server.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace httplib {
class Client;
}

namespace exactly::bench_tools {

using BenchClock = std::chrono::steady_clock;

struct Endpoint {
  std::string scheme_host_port;  // "http://127.0.0.1:8000"
  std::string path;              // "/v1/completions"
  std::string api_key;           // sent as a bearer token when not empty
  double timeout_s = 300;        // bound on a whole request, connection included
};

// "http://host:port" (path /v1/completions) or "http://host:port/some/path";
// throws Error(kUsage) for anything else.
Endpoint parse_endpoint(const std::string& url);

struct RequestOutcome {
  bool ok = false;
  std::string error;           // why it failed; empty when ok
  double start_s = 0;          // when it was sent, seconds after the benchmark began
  double ttft_s = 0;           // first chunk carrying text, from start
  double e2e_s = 0;            // end of stream, from start
  std::vector<double> itl_s;   // gaps between consecutive text chunks: [chunks - 1]
  int64_t output_tokens = 0;   // usage.completion_tokens, or text chunks when absent
  int64_t prompt_tokens = -1;  // usage.prompt_tokens, or -1 when absent
  bool usage_reported = false;
};

// Owns one HTTP client; use one per thread (httplib clients are not shared).
class StreamingClient {
 public:
  explicit StreamingClient(const Endpoint& endpoint);
  ~StreamingClient();
  StreamingClient(const StreamingClient&) = delete;
  StreamingClient& operator=(const StreamingClient&) = delete;

  // Sends `body` (stream options are set here) and reads the stream to its
  // end. `bench_start` anchors start_s.
  RequestOutcome send(const nlohmann::json& body, BenchClock::time_point bench_start);

 private:
  Endpoint endpoint_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace exactly::bench_tools
