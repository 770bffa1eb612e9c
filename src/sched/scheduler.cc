#include "sched/scheduler.h"

#include <algorithm>

#include "core/check.h"

namespace exactly {

bool Scheduler::MoreUrgent::operator()(const Request* a, const Request* b) const {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->arrival < b->arrival;
}

Scheduler::Scheduler(KVCacheManager& kv, SchedulerConfig config) : kv_(kv), config_(config) {
  EXACTLY_CHECK(config_.max_num_batched_tokens > 0 && config_.max_num_seqs > 0,
                "a step needs room for a token and a sequence (%lld tokens, %d sequences)",
                static_cast<long long>(config_.max_num_batched_tokens), config_.max_num_seqs);
}

bool Scheduler::fits_alone(int64_t max_total_tokens) const {
  return kv_.max_blocks_held(max_total_tokens, config_.max_num_batched_tokens) <= kv_.num_blocks();
}

Request& Scheduler::add_request(Request request) {
  const long long id = static_cast<long long>(request.id);
  EXACTLY_CHECK(requests_.count(request.id) == 0 && !kv_.contains(request.id), "request %lld already exists", id);
  EXACTLY_CHECK(request.num_prompt_tokens > 0 && request.num_prompt_tokens == request.num_tokens(),
                "request %lld: %lld prompt tokens, %lld tokens", id, static_cast<long long>(request.num_prompt_tokens),
                static_cast<long long>(request.num_tokens()));
  EXACTLY_CHECK(request.max_tokens > 0 && request.draft_tokens.empty(), "request %lld: max_tokens %lld", id,
                static_cast<long long>(request.max_tokens));
  int64_t longest = request.num_prompt_tokens + request.max_tokens;
  if (config_.max_model_len > 0) longest = std::min(longest, config_.max_model_len);
  EXACTLY_CHECK(fits_alone(longest), "request %lld needs %lld tokens, more than the KV cache holds", id,
                static_cast<long long>(longest));
  request.status = RequestStatus::kWaiting;
  request.num_computed_tokens = 0;
  request.arrival = next_arrival_++;
  auto owned = std::make_unique<Request>(std::move(request));
  Request* r = owned.get();
  requests_.emplace(r->id, std::move(owned));
  waiting_.insert(r);
  return *r;
}

Request* Scheduler::find(RequestId id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

const Request* Scheduler::find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

void Scheduler::insert_running(Request* r) {
  running_.insert(std::upper_bound(running_.begin(), running_.end(), r, MoreUrgent{}), r);
}

void Scheduler::remove_running(Request* r) {
  auto it = std::find(running_.begin(), running_.end(), r);
  EXACTLY_CHECK(it != running_.end(), "request %lld is not running", static_cast<long long>(r->id));
  running_.erase(it);
}

std::unique_ptr<Request> Scheduler::finish_request(RequestId id, RequestStatus reason) {
  EXACTLY_CHECK(is_finished(reason), "finishing a request as %s", to_string(reason));
  auto it = requests_.find(id);
  if (it == requests_.end()) return nullptr;
  Request* r = it->second.get();
  if (r->status == RequestStatus::kRunning) {
    remove_running(r);
    kv_.free(id);
  } else {
    waiting_.erase(r);
  }
  r->status = reason;
  std::unique_ptr<Request> owned = std::move(it->second);
  requests_.erase(it);
  return owned;
}

Request& Scheduler::fork_request(RequestId parent, RequestId child, int32_t child_token) {
  Request* p = find(parent);
  EXACTLY_CHECK(p != nullptr && p->status == RequestStatus::kRunning, "forking request %lld which is not running",
                static_cast<long long>(parent));
  // The parent's newest token has no KV yet: that is the one each sibling
  // replaces with its own sample, and the shared blocks stay valid for all.
  EXACTLY_CHECK(p->num_output_tokens() >= 1 && p->num_computed_tokens == p->num_tokens() - 1 &&
                    p->draft_tokens.empty(),
                "request %lld can only be forked right after sampling", static_cast<long long>(parent));
  EXACTLY_CHECK(requests_.count(child) == 0, "request %lld already exists", static_cast<long long>(child));
  auto owned = std::make_unique<Request>(*p);
  owned->id = child;
  owned->arrival = next_arrival_++;
  owned->num_preemptions = 0;
  owned->engine_state = nullptr;
  owned->tokens.back() = child_token;
  kv_.fork(parent, child);
  Request* c = owned.get();
  requests_.emplace(child, std::move(owned));
  insert_running(c);
  return *c;
}

int64_t Scheduler::chunk_size(const Request& r, int64_t budget) const {
  int64_t n = std::min(r.num_tokens_with_drafts() - r.num_computed_tokens, budget);
  if (config_.long_prefill_token_threshold > 0) n = std::min(n, config_.long_prefill_token_threshold);
  if (r.max_chunk_tokens > 0) n = std::min(n, r.max_chunk_tokens);
  return n;
}

void Scheduler::preempt(Request& r, SchedulerOutput& out) {
  kv_.free(r.id);
  remove_running(&r);
  r.status = RequestStatus::kPreempted;
  r.num_computed_tokens = 0;
  r.draft_tokens.clear();
  ++r.num_preemptions;
  waiting_.insert(&r);
  out.preempted.push_back(r.id);
}

// Returns false when `r` had to preempt itself.
bool Scheduler::schedule_running(Request& r, int64_t& budget, SchedulerOutput& out) {
  const int64_t n = chunk_size(r, budget);
  if (n <= 0) return true;
  while (!kv_.allocate(r.id, r.num_computed_tokens, n, out.copies)) {
    // running_ is ordered most urgent first and processed front to back, so
    // the back is never a request already scheduled this step.
    Request* victim = running_.back();
    preempt(*victim, out);
    if (victim == &r) return false;
  }
  out.scheduled.push_back({r.id, r.num_computed_tokens, n, r.num_computed_tokens + n == r.num_tokens_with_drafts()});
  out.num_batched_tokens += n;
  budget -= n;
  return true;
}

// Returns false when the KV cache cannot take `r` now.
bool Scheduler::admit_waiting(Request& r, int64_t& budget, SchedulerOutput& out) {
  PrefixHit hit;
  if (config_.enable_prefix_caching && !r.skip_prefix_cache) hit = kv_.find_cached_prefix(r.tokens);
  const int64_t saved_computed = r.num_computed_tokens;
  r.num_computed_tokens = hit.num_tokens;
  const int64_t n = chunk_size(r, budget);
  if (!kv_.allocate_new(r.id, r.tokens, hit, n)) {
    r.num_computed_tokens = saved_computed;
    return false;
  }
  waiting_.erase(&r);
  r.status = RequestStatus::kRunning;
  insert_running(&r);
  out.scheduled.push_back({r.id, r.num_computed_tokens, n, r.num_computed_tokens + n == r.num_tokens_with_drafts()});
  out.num_batched_tokens += n;
  budget -= n;
  return true;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = config_.max_num_batched_tokens;
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    if (!schedule_running(*running_[i], budget, out)) break;
  }
  // Admitting new work in a step that had to preempt would only evict it again.
  if (!out.preempted.empty()) return out;
  while (!waiting_.empty() && budget > 0 && running_.size() < static_cast<size_t>(config_.max_num_seqs)) {
    if (!admit_waiting(**waiting_.begin(), budget, out)) break;
  }
  return out;
}

void Scheduler::apply_tokens(Request& r, const ScheduledChunk& chunk, const StepTokens& step) {
  const long long id = static_cast<long long>(r.id);
  EXACTLY_CHECK(!step.tokens.empty() && step.tokens.size() <= r.draft_tokens.size() + 1,
                "request %lld: %zu tokens for %zu drafts", id, step.tokens.size(), r.draft_tokens.size());
  // Accepted drafts had their KV computed for exactly these tokens; the last
  // token is new and has none yet.
  const size_t accepted = step.tokens.size() - 1;
  for (size_t k = 0; k < accepted; ++k) {
    EXACTLY_CHECK(step.tokens[k] == r.draft_tokens[k], "request %lld: accepted token %zu is not the draft", id, k);
  }
  const int64_t known = r.num_tokens();
  r.tokens.insert(r.tokens.end(), step.tokens.begin(), step.tokens.end());
  r.num_computed_tokens = known + static_cast<int64_t>(accepted);
  r.draft_tokens.clear();
  if (r.num_computed_tokens < chunk.first_new_token + chunk.num_new_tokens) kv_.truncate(r.id, r.num_computed_tokens);
}

bool Scheduler::reached_length(const Request& r) const {
  return r.num_output_tokens() >= r.max_tokens ||
         (config_.max_model_len > 0 && r.num_tokens() >= config_.max_model_len);
}

std::vector<std::unique_ptr<Request>> Scheduler::update_after_step(const SchedulerOutput& output,
                                                                   std::span<const StepTokens> sampled) {
  std::unordered_map<RequestId, const StepTokens*> tokens_of;
  for (const StepTokens& s : sampled) {
    EXACTLY_CHECK(tokens_of.emplace(s.id, &s).second, "two results for request %lld", static_cast<long long>(s.id));
  }
  std::vector<std::unique_ptr<Request>> finished;
  for (const ScheduledChunk& chunk : output.scheduled) {
    Request* r = find(chunk.id);
    if (r == nullptr || r->status != RequestStatus::kRunning) continue;  // finished during the step
    const long long id = static_cast<long long>(r->id);
    EXACTLY_CHECK(r->num_computed_tokens == chunk.first_new_token, "request %lld changed during the step", id);
    auto it = tokens_of.find(chunk.id);
    const StepTokens* step = it == tokens_of.end() ? nullptr : it->second;
    if (chunk.samples) {
      EXACTLY_CHECK(step != nullptr, "request %lld sampled but got no token", id);
      apply_tokens(*r, chunk, *step);
    } else {
      EXACTLY_CHECK(step == nullptr, "request %lld got a token from a chunk that does not sample", id);
      r->num_computed_tokens += chunk.num_new_tokens;
    }
    kv_.commit_computed(r->id, r->tokens, r->num_computed_tokens);

    RequestStatus reason = RequestStatus::kRunning;
    if (step != nullptr && step->stop) {
      reason = RequestStatus::kFinishedStopped;
    } else if (reached_length(*r)) {
      reason = RequestStatus::kFinishedLength;
      // Several accepted tokens may overshoot; the request ends at max_tokens.
      const int64_t keep = r->num_prompt_tokens + r->max_tokens;
      if (r->num_tokens() > keep) r->tokens.resize(static_cast<size_t>(keep));
    }
    if (reason != RequestStatus::kRunning) finished.push_back(finish_request(r->id, reason));
  }
  return finished;
}

}  // namespace exactly
