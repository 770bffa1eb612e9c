#include "server/request_queue.h"

namespace exactly::server {

namespace {

// Appends `next` to `last`: both are outputs of the same engine request.
void merge_output(RequestOutput& last, RequestOutput&& next) {
  for (CompletionDelta& d : next.completions) {
    CompletionDelta* into = nullptr;
    for (CompletionDelta& l : last.completions)
      if (l.index == d.index) into = &l;
    if (!into) {
      last.completions.push_back(std::move(d));
      continue;
    }
    into->token_ids.insert(into->token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    into->text += d.text;
    into->logprobs.insert(into->logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (d.finish_reason) into->finish_reason = d.finish_reason;
  }
  last.finished = next.finished;
  last.prompt_tokens = next.prompt_tokens;
  last.cached_prompt_tokens = next.cached_prompt_tokens;
  last.completion_tokens = next.completion_tokens;
}

}  // namespace

void OutputChannel::push(ChannelEvent event) {
  {
    std::lock_guard lock(mutex_);
    if (!merge_into_last(event)) events_.push_back(std::move(event));
  }
  ready_.notify_one();
  if (wake_) wake_();
}

bool OutputChannel::merge_into_last(ChannelEvent& event) {
  if (events_.size() < capacity_ || event.kind != ChannelEvent::Kind::kOutput) return false;
  for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
    if (it->kind == ChannelEvent::Kind::kOutput && it->prompt_index == event.prompt_index) {
      merge_output(it->output, std::move(event.output));
      return true;
    }
  }
  return false;
}

std::optional<ChannelEvent> OutputChannel::pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  ChannelEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

EngineInbox::Admit EngineInbox::submit(Submission submission, size_t max_queued) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return Admit::kClosed;
    size_t waiting = engine_waiting_;
    for (const Submission& s : queued_) waiting += s.prompts.size();
    if (waiting + submission.prompts.size() > max_queued) return Admit::kOverloaded;
    queued_.push_back(std::move(submission));
  }
  ready_.notify_one();
  return Admit::kQueued;
}

std::vector<Submission> EngineInbox::take(std::chrono::milliseconds wait) {
  std::unique_lock lock(mutex_);
  if (queued_.empty() && wait.count() > 0) ready_.wait_for(lock, wait);
  std::vector<Submission> out;
  out.swap(queued_);
  // Until the engine reports its own count, the taken requests still wait.
  for (const Submission& s : out) engine_waiting_ += s.prompts.size();
  return out;
}

void EngineInbox::set_engine_waiting(size_t n) {
  std::lock_guard lock(mutex_);
  engine_waiting_ = n;
}

void EngineInbox::notify() { ready_.notify_all(); }

std::vector<Submission> EngineInbox::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  std::vector<Submission> out;
  out.swap(queued_);
  return out;
}

}  // namespace exactly::server
