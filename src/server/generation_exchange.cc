#include "server/generation_exchange.h"

#include <chrono>

#include "core/format.h"
#include "server/api_error.h"
#include "server/http_response.h"

namespace exactly::server {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// The engine takes a request at its next iteration; two minutes means it is stuck.
constexpr auto kAcceptTimeout = 120s;
// A stream quiet this long gets a comment line, which keeps proxies from
// timing it out and makes a write fail for a client that vanished without
// closing (one that closes is seen at once: the connection watches its socket).
constexpr auto kKeepAliveAfter = 15s;

std::string sse(const json& j) { return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n"; }

}  // namespace

GenerationExchange::GenerationExchange(GenerationRequest request, const Context& ctx, std::function<void()> wake,
                                       bool keep_alive, std::string request_id)
    : ctx_(ctx),
      channel_(std::make_shared<OutputChannel>()),
      response_(request.shape, ctx.tok),
      num_prompts_(request.prompts.size()),
      stream_(request.stream),
      include_usage_(request.include_usage),
      keep_alive_(keep_alive),
      request_id_(std::move(request_id)) {
  channel_->set_wake(std::move(wake));
  const auto now = Clock::now();
  switch (ctx.inbox.submit(Submission{channel_, std::move(request.prompts), now}, ctx.max_queued)) {
    case EngineInbox::Admit::kQueued: break;
    case EngineInbox::Admit::kOverloaded:
      throw ApiError{503, strformat("the server is overloaded: more than %zu requests are waiting", ctx.max_queued),
                     "server_error", "", "overloaded"};
    case EngineInbox::Admit::kClosed:
      throw ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"};
  }
  accept_deadline_ = now + kAcceptTimeout;
  last_sent_ = now;
}

GenerationExchange::~GenerationExchange() { channel_->cancel(); }

std::string GenerationExchange::take_output() {
  std::string out;
  while (phase_ != Phase::kDone) {
    std::optional<ChannelEvent> e = channel_->pop(0ms);
    if (!e) break;
    out += phase_ == Phase::kAccepting ? accept(*e) : absorb(*e);
  }
  if (!out.empty()) last_sent_ = Clock::now();
  return out;
}

std::string GenerationExchange::tick() {
  const auto now = Clock::now();
  if (phase_ == Phase::kAccepting && now > accept_deadline_)
    return fail(ApiError{503, "the engine did not take the request in time", "server_error", "", "timeout"});
  if (phase_ != Phase::kStreaming || now - last_sent_ < kKeepAliveAfter) return {};
  last_sent_ = now;
  return body_chunk(": keep-alive\n\n");
}

// Until every prompt is accepted nothing is sent: a refusal is still a 4xx.
std::string GenerationExchange::accept(ChannelEvent& e) {
  switch (e.kind) {
    case ChannelEvent::Kind::kRejected:
      return ctx_.stopping.load() ? fail(ApiError{503, e.error, "server_error", "", "shutting_down"})
                                  : fail(ApiError{400, e.error, "invalid_request_error", "", ""});
    case ChannelEvent::Kind::kAccepted:
      return ++accepted_ == num_prompts_ ? begin_output() : std::string();
    case ChannelEvent::Kind::kOutput: early_.push_back(std::move(e)); return {};
  }
  return {};
}

std::string GenerationExchange::begin_output() {
  std::string text;
  if (stream_) {
    phase_ = Phase::kStreaming;
    for (const json& c : response_.opening_chunks()) text += sse(c);
  } else {
    phase_ = Phase::kWhole;
  }
  std::string out = stream_ ? event_stream_head(keep_alive_, request_id_) : std::string();
  for (const ChannelEvent& e : early_)
    for (const json& c : response_.absorb(e)) text += sse(c);
  early_.clear();
  if (stream_) out += body_chunk(text);
  return out + finish_if_finished();
}

std::string GenerationExchange::absorb(const ChannelEvent& e) {
  std::string text;
  for (const json& c : response_.absorb(e)) text += sse(c);
  std::string out = stream_ ? body_chunk(text) : std::string();
  return out + finish_if_finished();
}

std::string GenerationExchange::finish_if_finished() {
  if (!response_.finished()) return {};
  phase_ = Phase::kDone;
  if (!stream_)
    return serialize_reply(json_reply(200, response_.whole().dump(-1, ' ', false, json::error_handler_t::replace)),
                           keep_alive_, request_id_);
  std::string text;
  if (include_usage_) text += sse(response_.usage_chunk());
  text += "data: [DONE]\n\n";
  return body_chunk(text) + std::string(last_chunk());
}

std::string GenerationExchange::fail(const ApiError& e) {
  channel_->cancel();
  phase_ = Phase::kDone;
  return serialize_reply(error_reply(e), keep_alive_, request_id_);
}

}  // namespace exactly::server
