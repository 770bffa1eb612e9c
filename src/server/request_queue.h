// Where the HTTP side and the engine thread meet. The HTTP side puts whole
// requests into the EngineInbox; the engine thread answers each through the
// request's OutputChannel. Only the engine thread touches the Engine.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/request_params.h"

namespace exactly::server {

using Clock = std::chrono::steady_clock;

// What the engine thread tells one HTTP request about one of its prompts.
struct ChannelEvent {
  enum class Kind { kAccepted, kRejected, kOutput };
  Kind kind = Kind::kOutput;
  size_t prompt_index = 0;
  std::string error;     // kRejected: why the engine refused the prompt
  RequestOutput output;  // kOutput
};

// Engine thread → one HTTP request. Bounded without ever blocking the engine
// thread: when the reader falls behind, a new output is merged into the last
// queued output of the same prompt (deltas concatenate), so a slow client
// costs memory proportional to its own text, never a stalled step.
class OutputChannel {
 public:
  explicit OutputChannel(size_t capacity = 64) : capacity_(capacity) {}

  void push(ChannelEvent event);
  // Waits up to `timeout`; nullopt when nothing arrived.
  std::optional<ChannelEvent> pop(std::chrono::milliseconds timeout);
  // Called after every push, outside the lock, so that an event loop learns
  // of outputs without a thread waiting in pop(). Set before the channel is
  // submitted; it must not block.
  void set_wake(std::function<void()> wake) { wake_ = std::move(wake); }

  // The client went away (or the request failed): the engine thread aborts
  // whatever of this request is still running at its next iteration.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  // When the reader is behind, an output joins the last queued output of its
  // prompt (under the lock). False when it must be queued on its own.
  bool merge_into_last(ChannelEvent& event);

  size_t capacity_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ChannelEvent> events_;
  std::atomic<bool> cancelled_{false};
  std::function<void()> wake_;
};

// One HTTP request: one engine request per prompt, all answered on `channel`.
struct Submission {
  std::shared_ptr<OutputChannel> channel;
  std::vector<RequestParams> prompts;
  Clock::time_point arrival;
};

// The HTTP side → the engine thread.
class EngineInbox {
 public:
  enum class Admit { kQueued, kOverloaded, kClosed };

  // Refuses the submission when the requests waiting (in the inbox and in
  // the engine's queue) already number `max_queued`.
  Admit submit(Submission submission, size_t max_queued);

  // Engine thread: takes everything queued, waiting up to `wait` when empty.
  std::vector<Submission> take(std::chrono::milliseconds wait);
  // Engine thread: how many requests wait inside the engine, for admission.
  void set_engine_waiting(size_t n);
  // Wakes the engine thread (e.g. to stop).
  void notify();
  // No more submissions are admitted; returns what was still queued.
  std::vector<Submission> close();

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<Submission> queued_;
  size_t engine_waiting_ = 0;
  bool closed_ = false;
};

}  // namespace exactly::server
