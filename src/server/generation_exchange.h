// One generation request from its submission to its last byte, without a
// socket: the connection asks it for bytes when its channel wakes it and once
// a second, and writes what it gets. Streams, whole responses and errors all
// come out as ready-made HTTP bytes, so a connection holds no thread while it
// waits for the engine.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/openai_response.h"
#include "server/request_queue.h"

namespace exactly::server {

class GenerationExchange {
 public:
  struct Context {
    EngineInbox& inbox;
    size_t max_queued = 256;
    const Tokenizer& tok;
    const std::atomic<bool>& stopping;  // the server is shutting down: refusals are 503s
  };

  // Submits the request's prompts. `wake` is called from the engine thread
  // after every output it sends. Throws ApiError (503) when the queue is
  // full or the server is shutting down.
  GenerationExchange(GenerationRequest request, const Context& ctx, std::function<void()> wake, bool keep_alive,
                     std::string request_id);
  // Cancels whatever of the request the engine still runs (the client went away).
  ~GenerationExchange();
  GenerationExchange(const GenerationExchange&) = delete;
  GenerationExchange& operator=(const GenerationExchange&) = delete;

  // What the channel holds, as bytes to send: an error reply, a stream's head
  // and chunks, or the whole reply once every prompt finished.
  std::string take_output();
  // About once a second: the acceptance deadline, and a comment in a stream
  // quiet for 15 s.
  std::string tick();
  // The last byte has been handed out.
  bool done() const { return phase_ == Phase::kDone; }

 private:
  enum class Phase { kAccepting, kStreaming, kWhole, kDone };

  std::string accept(ChannelEvent& e);
  std::string begin_output();
  std::string absorb(const ChannelEvent& e);
  std::string finish_if_finished();
  std::string fail(const ApiError& e);

  const Context& ctx_;
  std::shared_ptr<OutputChannel> channel_;
  OpenAIResponse response_;
  std::vector<ChannelEvent> early_;  // outputs that came before every prompt was accepted
  size_t num_prompts_ = 0, accepted_ = 0;
  bool stream_ = false, include_usage_ = false, keep_alive_ = true;
  std::string request_id_;
  Phase phase_ = Phase::kAccepting;
  Clock::time_point accept_deadline_, last_sent_;
};

}  // namespace exactly::server
