// GenerationExchange, the life of one generation request without a socket:
// this test plays the engine thread (taking submissions from the inbox and
// pushing events into their channels) and reads the bytes the exchange hands
// out as a client would: HTTP head, chunked framing decoded here, server-sent
// events parsed as JSON.
#include "server/generation_exchange.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "test_vocab.h"

namespace exactly::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

struct Harness {
  std::unique_ptr<Tokenizer> tok = Tokenizer::create(testing::byte_level_spec({}));
  EngineInbox inbox;
  std::atomic<bool> stopping{false};
  GenerationExchange::Context ctx{inbox, 8, *tok, stopping};
  int wakes = 0;

  std::unique_ptr<GenerationExchange> start(size_t prompts, bool stream, int n = 1) {
    GenerationRequest r;
    RequestParams p;
    p.prompt = {1, 2};
    p.n = n;
    r.prompts.assign(prompts, p);
    r.shape.endpoint = Endpoint::kCompletions;
    r.shape.model = "m";
    r.shape.num_prompts = prompts;
    r.shape.n = n;
    r.stream = stream;
    return std::make_unique<GenerationExchange>(std::move(r), ctx, [this] { ++wakes; }, true, "rid");
  }

  // The engine thread's side: the channel of the one submission waiting.
  std::shared_ptr<OutputChannel> take() {
    auto taken = inbox.take(0ms);
    EXPECT_EQ(taken.size(), 1u);
    return taken.empty() ? nullptr : taken.front().channel;
  }
};

ChannelEvent accepted(size_t prompt) {
  ChannelEvent e;
  e.kind = ChannelEvent::Kind::kAccepted;
  e.prompt_index = prompt;
  return e;
}

ChannelEvent output(size_t prompt, const std::string& text, std::optional<FinishReason> finish, bool finished) {
  ChannelEvent e;
  e.prompt_index = prompt;
  CompletionDelta d;
  d.text = text;
  d.token_ids.assign(text.size(), 65);
  d.finish_reason = finish;
  e.output.completions.push_back(d);
  e.output.finished = finished;
  e.output.completion_tokens = static_cast<int64_t>(text.size());
  return e;
}

// A chunked body decoded: the data, and whether the last chunk ended it.
struct Dechunked {
  std::string data;
  bool ended = false;
};

Dechunked dechunk(const std::string& bytes) {
  Dechunked out;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t eol = bytes.find("\r\n", at);
    EXPECT_NE(eol, std::string::npos);
    const size_t size = std::stoul(bytes.substr(at, eol - at), nullptr, 16);
    if (size == 0) {
      EXPECT_EQ(bytes.substr(eol), "\r\n\r\n");
      out.ended = true;
      return out;
    }
    out.data += bytes.substr(eol + 2, size);
    EXPECT_EQ(bytes.substr(eol + 2 + size, 2), "\r\n");
    at = eol + 2 + size + 2;
  }
  return out;
}

// The events of a server-sent event stream: JSON objects, "[DONE]" kept as a string.
std::vector<json> events(const std::string& sse) {
  std::vector<json> out;
  size_t at = 0;
  while ((at = sse.find("data: ", at)) != std::string::npos) {
    const size_t end = sse.find("\n\n", at);
    const std::string payload = sse.substr(at + 6, end - at - 6);
    out.push_back(payload == "[DONE]" ? json(payload) : json::parse(payload));
    at = end;
  }
  return out;
}

std::vector<std::string> finishes(const std::vector<json>& evs) {
  std::vector<std::string> out;
  for (const json& e : evs)
    if (e.is_object())
      for (const json& c : e["choices"])
        if (!c["finish_reason"].is_null()) out.push_back(c["finish_reason"]);
  return out;
}

TEST(GenerationExchange, StreamSendsHeadChunksAndDoneThenEndsTheBody) {
  Harness h;
  auto x = h.start(1, true);
  auto channel = h.take();
  EXPECT_EQ(x->take_output(), "");  // nothing before the engine accepts
  channel->push(accepted(0));
  channel->push(output(0, "Hel", std::nullopt, false));
  std::string bytes = x->take_output();
  const size_t head_end = bytes.find("\r\n\r\n");
  const std::string head = bytes.substr(0, head_end + 4);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_NE(head.find("Content-Type: text/event-stream\r\n"), std::string::npos);
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_NE(head.find("x-request-id: rid\r\n"), std::string::npos);
  channel->push(output(0, "lo", FinishReason::kLength, true));
  bytes = bytes.substr(head_end + 4) + x->take_output();
  EXPECT_TRUE(x->done());
  EXPECT_EQ(h.wakes, 3);  // one per push

  const Dechunked body = dechunk(bytes);
  EXPECT_TRUE(body.ended);
  const std::vector<json> evs = events(body.data);
  ASSERT_GE(evs.size(), 3u);
  EXPECT_EQ(evs.back(), "[DONE]");
  std::string text;
  for (const json& e : evs)
    if (e.is_object()) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(finishes(evs), std::vector<std::string>{"length"});
}

TEST(GenerationExchange, AnEngineAbortEndsTheStreamWithAbortAndDone) {
  Harness h;
  auto x = h.start(1, true, 2);
  auto channel = h.take();
  channel->push(accepted(0));
  channel->push(output(0, "a", std::nullopt, false));
  // What EngineLoop::abort_all sends on shutdown: finished, no reason.
  ChannelEvent last;
  last.prompt_index = 0;
  last.output.finished = true;
  channel->push(last);
  std::string bytes = x->take_output();
  EXPECT_TRUE(x->done());
  const std::vector<json> evs = events(dechunk(bytes.substr(bytes.find("\r\n\r\n") + 4)).data);
  EXPECT_EQ(evs.back(), "[DONE]");
  EXPECT_EQ(finishes(evs), (std::vector<std::string>{"abort", "abort"}));  // both of n = 2
}

TEST(GenerationExchange, ARefusalBeforeAcceptanceIsAnErrorReply) {
  for (bool stopping : {false, true}) {
    Harness h;
    h.stopping = stopping;
    auto x = h.start(2, true);
    auto channel = h.take();
    channel->push(accepted(0));
    ChannelEvent refused;
    refused.kind = ChannelEvent::Kind::kRejected;
    refused.prompt_index = 1;
    refused.error = "prompt too long";
    channel->push(refused);
    const std::string bytes = x->take_output();
    EXPECT_TRUE(x->done());
    EXPECT_TRUE(channel->cancelled());  // the accepted prompt is aborted
    EXPECT_EQ(bytes.rfind(stopping ? "HTTP/1.1 503" : "HTTP/1.1 400", 0), 0u) << bytes;
    const json err = json::parse(bytes.substr(bytes.find("\r\n\r\n") + 4))["error"];
    EXPECT_EQ(err["message"], "prompt too long");
    EXPECT_EQ(err["code"], stopping ? json("shutting_down") : json(nullptr));
  }
}

TEST(GenerationExchange, AFullOrClosedInboxRefusesAt503) {
  Harness h;
  h.ctx.max_queued = 1;
  try {
    h.start(2, false);
    ADD_FAILURE() << "two prompts past a queue of one";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 503);
    EXPECT_EQ(e.code, "overloaded");
  }
  h.inbox.close();
  try {
    h.start(1, false);
    ADD_FAILURE() << "a closed inbox";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "shutting_down");
  }
}

TEST(GenerationExchange, AWholeResponseWaitsForEveryPromptAndKeepsEarlyOutputs) {
  Harness h;
  auto x = h.start(2, false);
  auto channel = h.take();
  channel->push(accepted(0));
  channel->push(output(0, "one", FinishReason::kStop, true));  // before prompt 1 is accepted
  channel->push(accepted(1));
  EXPECT_EQ(x->take_output(), "");
  EXPECT_FALSE(x->done());
  channel->push(output(1, "two", FinishReason::kLength, true));
  const std::string bytes = x->take_output();
  EXPECT_TRUE(x->done());
  const size_t head_end = bytes.find("\r\n\r\n");
  const std::string body = bytes.substr(head_end + 4);
  EXPECT_NE(bytes.substr(0, head_end).find("Content-Length: " + std::to_string(body.size())), std::string::npos);
  const json reply = json::parse(body);
  ASSERT_EQ(reply["choices"].size(), 2u);
  EXPECT_EQ(reply["choices"][0]["text"], "one");
  EXPECT_EQ(reply["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(reply["choices"][1]["text"], "two");
  EXPECT_EQ(reply["usage"]["completion_tokens"], 6);
}

TEST(GenerationExchange, DestroyingItCancelsWhatTheEngineStillRuns) {
  Harness h;
  auto x = h.start(1, true);
  auto channel = h.take();
  channel->push(accepted(0));
  EXPECT_FALSE(channel->cancelled());
  x.reset();  // the client went away
  EXPECT_TRUE(channel->cancelled());
}

}  // namespace
}  // namespace exactly::server
