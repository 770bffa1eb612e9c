#include "bench_tools/serve_client.h"

#include <httplib.h>

#include <algorithm>
#include <cmath>

#include "bench_tools/serve_sse.h"
#include "core/error.h"
#include "core/format.h"

namespace exactly::bench_tools {

namespace {

double seconds(BenchClock::duration d) { return std::chrono::duration<double>(d).count(); }

// Failure reasons are grouped and counted in the report, so they quote only
// a short, single-line piece of what the server said.
std::string snippet(std::string_view text, size_t limit = 120) {
  std::string s(text.substr(0, limit));
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

// Applies the SSE payloads of one response, in order, to its outcome.
class StreamReader {
 public:
  StreamReader(RequestOutcome& out, BenchClock::time_point sent) : out_(out), sent_(sent) {}

  // False stops the stream: a malformed or error chunk ends the request.
  bool on_payload(const std::string& payload, BenchClock::time_point now) {
    if (payload == "[DONE]") {
      done_ = true;
      return true;
    }
    nlohmann::json j = nlohmann::json::parse(payload, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return fail("malformed SSE chunk: " + snippet(payload));
    if (j.contains("error")) return fail("error chunk: " + snippet(j["error"].dump()));
    if (j.contains("usage") && j["usage"].is_object()) {
      const nlohmann::json& u = j["usage"];
      if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
        out_.output_tokens = u["completion_tokens"].get<int64_t>();
        out_.usage_reported = true;
      }
      if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
        out_.prompt_tokens = u["prompt_tokens"].get<int64_t>();
    }
    if (!j.contains("choices")) return true;
    if (!j["choices"].is_array()) return fail("malformed SSE chunk: choices is not an array");
    if (j["choices"].empty()) return true;  // the usage chunk
    if (carries_tokens(j["choices"][0])) record_chunk(now);
    return true;
  }

  bool done() const { return done_; }
  int64_t text_chunks() const { return text_chunks_; }

 private:
  // A chunk with only a finish_reason carries no token and is not timed.
  static bool carries_tokens(const nlohmann::json& choice) {
    if (!choice.is_object()) return false;
    if (choice.contains("text") && choice["text"].is_string() && !choice["text"].get_ref<const std::string&>().empty())
      return true;
    return choice.contains("token_ids") && choice["token_ids"].is_array() && !choice["token_ids"].empty();
  }

  void record_chunk(BenchClock::time_point now) {
    if (text_chunks_ == 0)
      out_.ttft_s = seconds(now - sent_);
    else
      out_.itl_s.push_back(seconds(now - last_));
    last_ = now;
    ++text_chunks_;
  }

  bool fail(std::string reason) {
    out_.error = std::move(reason);
    return false;
  }

  RequestOutcome& out_;
  BenchClock::time_point sent_, last_;
  bool done_ = false;
  int64_t text_chunks_ = 0;
};

}  // namespace

Endpoint parse_endpoint(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos || (url.substr(0, scheme_end) != "http" && url.substr(0, scheme_end) != "https"))
    throw Error("--url: '" + url + "' is not an http:// or https:// URL", ExitCode::kUsage);
  const size_t path_start = url.find('/', scheme_end + 3);
  Endpoint e;
  e.scheme_host_port = url.substr(0, path_start);
  if (e.scheme_host_port.size() == scheme_end + 3) throw Error("--url: '" + url + "' names no host", ExitCode::kUsage);
  e.path = path_start == std::string::npos ? "" : url.substr(path_start);
  if (e.path.empty() || e.path == "/") e.path = "/v1/completions";
  return e;
}

StreamingClient::StreamingClient(const Endpoint& endpoint)
    : endpoint_(endpoint), client_(std::make_unique<httplib::Client>(endpoint.scheme_host_port)) {
  const auto timeout = std::chrono::duration<double>(endpoint.timeout_s);
  client_->set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client_->set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client_->set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
}

StreamingClient::~StreamingClient() = default;

RequestOutcome StreamingClient::send(const nlohmann::json& body, BenchClock::time_point bench_start) {
  nlohmann::json streaming = body;
  streaming["stream"] = true;
  streaming["stream_options"] = {{"include_usage", true}};

  httplib::Request req;
  req.method = "POST";
  req.path = endpoint_.path;
  req.body = streaming.dump();
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "text/event-stream");
  if (!endpoint_.api_key.empty()) req.headers.emplace("Authorization", "Bearer " + endpoint_.api_key);

  RequestOutcome out;
  const BenchClock::time_point sent = BenchClock::now();
  // The read timeout bounds a silent server; this deadline bounds one that
  // keeps trickling bytes forever.
  const BenchClock::time_point deadline =
      sent + std::chrono::duration_cast<BenchClock::duration>(std::chrono::duration<double>(endpoint_.timeout_s));
  out.start_s = seconds(sent - bench_start);
  StreamReader reader(out, sent);
  SseDecoder decoder;
  std::vector<std::string> payloads;
  int status = 0;
  std::string error_body;
  bool timed_out = false;

  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;  // read an error body too: it says why
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const BenchClock::time_point now = BenchClock::now();
    if (now > deadline) {
      timed_out = true;
      return false;
    }
    if (status != 200) {
      if (error_body.size() < 4096) error_body.append(data, std::min<size_t>(n, 4096));
      return true;
    }
    payloads.clear();
    decoder.feed(std::string_view(data, n), payloads);
    for (const std::string& p : payloads)
      if (!reader.on_payload(p, now)) return false;
    return true;
  };

  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent_ok = client_->send(req, res, err);
  out.e2e_s = seconds(BenchClock::now() - sent);

  if (!out.error.empty()) return out;  // the stream reader stopped it
  if (timed_out) {
    out.error = strformat("timed out after %.0f s", endpoint_.timeout_s);
    return out;
  }
  if (!sent_ok) {
    out.error = err == httplib::Error::Read && out.e2e_s >= endpoint_.timeout_s
                    ? strformat("timed out after %.0f s", endpoint_.timeout_s)
                    : "connection: " + httplib::to_string(err);
    return out;
  }
  if (res.status != 200) {
    out.error = strformat("HTTP %d: %s", res.status, snippet(error_body).c_str());
    return out;
  }
  if (!reader.done()) {
    out.error = "stream ended without [DONE]";
    return out;
  }
  if (reader.text_chunks() == 0) {
    out.error = "stream carried no text";
    return out;
  }
  if (!out.usage_reported) out.output_tokens = reader.text_chunks();
  out.ok = true;
  return out;
}

}  // namespace exactly::bench_tools
