#include "server/engine_loop.h"

#include <chrono>

#include "core/error.h"

namespace exactly::server {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

ChannelEvent final_abort(size_t prompt_index) {
  ChannelEvent e;
  e.prompt_index = prompt_index;
  e.output.finished = true;
  return e;
}

}  // namespace

void EngineLoop::run() {
  using namespace std::chrono_literals;
  while (!stopping_.load()) {
    // Idle: sleep until a submission arrives; busy: just look.
    auto taken = inbox_.take(engine_.has_unfinished() ? 0ms : 100ms);
    for (Submission& s : taken) admit(s);
    abort_cancelled();
    inbox_.set_engine_waiting(engine_.num_waiting());
    if (engine_.has_unfinished() && !stopping_.load()) {
      std::vector<RequestOutput> outputs = engine_.step();
      for (RequestOutput& out : outputs) route(out);
      inbox_.set_engine_waiting(engine_.num_waiting());
    }
    publish();
  }
  for (Submission& s : inbox_.close()) {
    for (size_t i = 0; i < s.prompts.size(); ++i) {
      ChannelEvent e;
      e.kind = ChannelEvent::Kind::kRejected;
      e.prompt_index = i;
      e.error = "the server is shutting down";
      s.channel->push(std::move(e));
    }
  }
  abort_all();
  publish();
}

void EngineLoop::stop() {
  stopping_.store(true);
  inbox_.notify();
}

void EngineLoop::admit(Submission& s) {
  for (size_t i = 0; i < s.prompts.size(); ++i) {
    ChannelEvent e;
    e.prompt_index = i;
    try {
      ClientRequestId id = engine_.add_request(s.prompts[i]);
      live_[id] = Live{s.channel, i, s.arrival, s.arrival, s.arrival, false};
      e.kind = ChannelEvent::Kind::kAccepted;
    } catch (const Error& err) {
      // The HTTP thread answers 400 and cancels the channel, which aborts
      // this submission's other prompts at the next iteration.
      e.kind = ChannelEvent::Kind::kRejected;
      e.error = err.what();
    }
    s.channel->push(std::move(e));
  }
}

void EngineLoop::abort_cancelled() {
  for (auto it = live_.begin(); it != live_.end();) {
    if (it->second.channel->cancelled()) {
      engine_.abort(it->first);
      ++snapshot_.requests_abort;
      it = live_.erase(it);
    } else {
      ++it;
    }
  }
}

void EngineLoop::route(RequestOutput& out) {
  auto it = live_.find(out.id);
  if (it == live_.end()) return;
  Live& live = it->second;
  const auto now = Clock::now();
  bool has_tokens = false;
  for (const CompletionDelta& d : out.completions) has_tokens |= !d.token_ids.empty();
  if (has_tokens) {
    if (!live.got_token) {
      snapshot_.time_to_first_token.observe(seconds(now - live.arrival));
      live.first_token = now;
    } else {
      snapshot_.inter_token_latency.observe(seconds(now - live.last_output));
    }
    live.got_token = true;
    live.last_output = now;
  }
  if (out.finished) {
    snapshot_.prompt_tokens += out.prompt_tokens;
    snapshot_.e2e_latency.observe(seconds(now - live.arrival));
    if (out.first_scheduled != Clock::time_point{}) {
      snapshot_.queue_time.observe(seconds(out.first_scheduled - live.arrival));
      if (live.got_token) {
        snapshot_.prefill_time.observe(seconds(live.first_token - out.first_scheduled));
        snapshot_.decode_time.observe(seconds(now - live.first_token));
      }
    }
    bool any_length = false, any_abort = false;
    for (const CompletionDelta& d : out.completions) {
      any_length |= d.finish_reason == FinishReason::kLength;
      any_abort |= d.finish_reason == FinishReason::kAbort;
    }
    if (any_abort) ++snapshot_.requests_abort;
    else if (any_length) ++snapshot_.requests_length;
    else ++snapshot_.requests_stop;
  }
  const bool finished = out.finished;
  ChannelEvent e;
  e.prompt_index = live.prompt_index;
  e.output = std::move(out);
  live.channel->push(std::move(e));
  if (finished) live_.erase(it);
}

void EngineLoop::abort_all() {
  for (auto& [id, live] : live_) {
    engine_.abort(id);
    ++snapshot_.requests_abort;
    live.channel->push(final_abort(live.prompt_index));
  }
  live_.clear();
}

void EngineLoop::publish() {
  snapshot_.running = engine_.num_running();
  snapshot_.waiting = engine_.num_waiting();
  snapshot_.kv = engine_.kv_stats();
  snapshot_.engine = engine_.stats();
  metrics_.publish(snapshot_);
}

}  // namespace exactly::server
