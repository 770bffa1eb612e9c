#include "server/generation_handler.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/format.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "server/request_body.h"

namespace exactly::server {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// What the HTTP thread made of the body.
struct Parsed {
  std::vector<RequestParams> prompts;
  ResponseShape shape;
  bool stream = false;
  bool include_usage = false;
};

[[noreturn]] void bad_field(const std::string& field, const std::string& why) {
  throw ApiError{400, strformat("field '%s' %s", field.c_str(), why.c_str()), "invalid_request_error", field, ""};
}

bool read_bool(const json& body, const char* field) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) bad_field(field, "must be a boolean");
  return it->get<bool>();
}

void check_model(const json& body, const std::vector<std::string>& names) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_string()) bad_field("model", "must be a string");
  const std::string name = it->get<std::string>();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw ApiError{404, strformat("The model '%s' does not exist; this server serves '%s'.", name.c_str(),
                                  names.front().c_str()),
                   "invalid_request_error", "model", "model_not_found"};
}

Parsed parse(Endpoint endpoint, const json& body, const GenerationContext& ctx) {
  Parsed out;
  RequestParams base = parse_generation_fields(body, "");
  std::vector<std::vector<int32_t>> prompts;
  std::optional<int64_t> max_tokens = parse_max_tokens(body, "");
  const char* prompt_field = endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (endpoint == Endpoint::kCompletions) {
    prompts = parse_prompts(body, ctx.tok, ctx.vocab_size, true, "");
    base.logprobs = parse_completion_logprobs(body, "");
    if (read_bool(body, "echo")) {
      for (const auto& p : prompts) out.shape.echo.push_back(ctx.tok.decode(p));
      // OpenAI's legacy API scores an echoed prompt when logprobs are asked.
      out.shape.echo_logprobs = base.logprobs >= 0;
    }
  } else {
    auto messages = body.find("messages");
    if (messages == body.end()) bad_field("messages", "is required");
    prompts.push_back(chat_prompt_tokens(*messages, ctx.tok));
    if (read_bool(body, "logprobs")) base.logprobs = 0;
    if (auto top = body.find("top_logprobs"); top != body.end() && !top->is_null()) {
      if (!top->is_number_integer() || top->get<int64_t>() < 0 || top->get<int64_t>() > 20)
        bad_field("top_logprobs", "must be an integer between 0 and 20");
      if (base.logprobs < 0) bad_field("top_logprobs", "needs 'logprobs' set to true");
      base.logprobs = top->get<int32_t>();
    }
  }
  for (const auto& p : prompts) {
    RequestParams r = base;
    r.prompt = p;
    // Chat, as vLLM: by default the answer may fill the rest of the context.
    // Completions, as OpenAI: 16 tokens.
    const int64_t room = int64_t{ctx.max_model_len} - static_cast<int64_t>(p.size());
    r.max_tokens = max_tokens.value_or(endpoint == Endpoint::kChat ? std::max<int64_t>(room, 1) : 16);
    if (static_cast<int64_t>(p.size()) + r.max_tokens > ctx.max_model_len)
      throw ApiError{400,
                     strformat("This model's maximum context length is %d tokens. However, you requested %lld tokens "
                               "(%zu in the prompt, %lld for the completion).",
                               ctx.max_model_len, static_cast<long long>(static_cast<int64_t>(p.size()) + r.max_tokens),
                               p.size(), static_cast<long long>(r.max_tokens)),
                     "invalid_request_error", max_tokens ? "max_tokens" : prompt_field, "context_length_exceeded"};
    out.prompts.push_back(std::move(r));
  }
  out.shape.endpoint = endpoint;
  out.shape.model = ctx.model_names.front();
  out.shape.num_prompts = prompts.size();
  out.shape.n = base.n;
  out.shape.logprobs = base.logprobs >= 0;
  out.shape.prompt_logprobs = base.prompt_logprobs >= 0;
  out.shape.return_token_ids = read_bool(body, "return_token_ids");
  out.shape.prompt_ids = prompts;
  if (out.shape.echo_logprobs)
    for (RequestParams& r : out.prompts) r.prompt_logprobs = std::max(r.prompt_logprobs, base.logprobs);
  out.stream = read_bool(body, "stream");
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) bad_field("stream_options", "must be an object");
    out.include_usage = read_bool(*so, "include_usage");
  }
  return out;
}

// Waits until the engine thread accepted every prompt; early outputs are
// kept for the response. A refusal becomes a 400 and cancels the rest.
std::vector<ChannelEvent> await_acceptance(OutputChannel& channel, size_t num_prompts) {
  std::vector<ChannelEvent> early;
  size_t accepted = 0;
  const auto deadline = Clock::now() + 120s;
  while (accepted < num_prompts) {
    std::optional<ChannelEvent> e = channel.pop(100ms);
    if (!e) {
      if (Clock::now() > deadline) {
        channel.cancel();
        throw ApiError{503, "the engine did not take the request in time", "server_error", "", "timeout"};
      }
      continue;
    }
    if (e->kind == ChannelEvent::Kind::kRejected) {
      channel.cancel();
      throw ApiError{400, e->error, "invalid_request_error", "", ""};
    }
    if (e->kind == ChannelEvent::Kind::kAccepted) ++accepted;
    else early.push_back(std::move(*e));
  }
  return early;
}

std::string sse(const json& j) { return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n"; }

struct Stream {
  std::shared_ptr<OutputChannel> channel;
  OpenAIResponse response;
  std::vector<ChannelEvent> pending;  // outputs that came with the acceptance
  bool include_usage = false;
  bool opened = false;
};

// One call of cpp-httplib's chunked content provider: write what is ready,
// or a comment line after a quiet second so a vanished client is noticed
// (the write fails) even while its request waits in the queue.
bool stream_step(Stream& s, httplib::DataSink& sink) {
  std::string text;
  if (!s.opened) {
    for (const json& c : s.response.opening_chunks()) text += sse(c);
    for (const ChannelEvent& e : s.pending)
      for (const json& c : s.response.absorb(e)) text += sse(c);
    s.pending.clear();
    s.opened = true;
  }
  if (!s.response.finished()) {
    if (std::optional<ChannelEvent> e = s.channel->pop(1000ms)) {
      for (const json& c : s.response.absorb(*e)) text += sse(c);
    } else if (text.empty()) {
      text = ": keep-alive\n\n";
    }
  }
  if (s.response.finished()) {
    if (s.include_usage) text += sse(s.response.usage_chunk());
    text += "data: [DONE]\n\n";
  }
  if (!text.empty() && !sink.write(text.data(), text.size())) {
    s.channel->cancel();
    return false;
  }
  if (s.response.finished()) sink.done();
  return true;
}

}  // namespace

void handle_generation(Endpoint endpoint, const httplib::Request& req, httplib::Response& res,
                       const GenerationContext& ctx) {
  json body;
  try {
    body = parse_request_body(req.body);
  } catch (const RequestError& e) {
    throw ApiError{400, std::string("the body is not valid JSON: ") + e.what(), "invalid_request_error", "", ""};
  }
  if (!body.is_object()) throw ApiError{400, "the body must be a JSON object", "invalid_request_error", "", ""};
  check_model(body, ctx.model_names);
  Parsed parsed;
  try {
    parsed = parse(endpoint, body, ctx);
  } catch (const RequestError& e) {
    throw ApiError{400, e.what(), "invalid_request_error", e.param(), ""};
  }

  auto channel = std::make_shared<OutputChannel>();
  const size_t num_prompts = parsed.prompts.size();
  switch (ctx.inbox.submit(Submission{channel, std::move(parsed.prompts), Clock::now()}, ctx.max_queued)) {
    case EngineInbox::Admit::kQueued: break;
    case EngineInbox::Admit::kOverloaded:
      throw ApiError{503, strformat("the server is overloaded: more than %zu requests are waiting", ctx.max_queued),
                     "server_error", "", "overloaded"};
    case EngineInbox::Admit::kClosed:
      throw ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"};
  }
  std::vector<ChannelEvent> early = await_acceptance(*channel, num_prompts);

  if (parsed.stream) {
    auto s = std::make_shared<Stream>(Stream{channel, OpenAIResponse(parsed.shape, ctx.tok), std::move(early),
                                             parsed.include_usage, false});
    res.set_chunked_content_provider(
        "text/event-stream", [s](size_t, httplib::DataSink& sink) { return stream_step(*s, sink); },
        [s](bool) { s->channel->cancel(); });
    return;
  }
  // cpp-httplib 0.11 cannot tell that a waiting client has gone, so a
  // non-streaming request runs to its end even then.
  OpenAIResponse response(parsed.shape, ctx.tok);
  for (const ChannelEvent& e : early) response.absorb(e);
  while (!response.finished())
    if (std::optional<ChannelEvent> e = channel->pop(1000ms)) response.absorb(*e);
  res.set_content(response.whole().dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

}  // namespace exactly::server
