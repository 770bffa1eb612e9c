#include "sched/request.h"

#include "core/check.h"

namespace exactly {

bool is_finished(RequestStatus status) {
  return status == RequestStatus::kFinishedStopped || status == RequestStatus::kFinishedLength ||
         status == RequestStatus::kFinishedAborted;
}

const char* to_string(RequestStatus status) {
  switch (status) {
    case RequestStatus::kWaiting: return "waiting";
    case RequestStatus::kRunning: return "running";
    case RequestStatus::kPreempted: return "preempted";
    case RequestStatus::kFinishedStopped: return "finished_stopped";
    case RequestStatus::kFinishedLength: return "finished_length";
    case RequestStatus::kFinishedAborted: return "finished_aborted";
  }
  return "?";
}

Request make_request(RequestId id, std::vector<int32_t> prompt, int64_t max_tokens, int32_t priority) {
  EXACTLY_CHECK(!prompt.empty(), "request %lld has an empty prompt", static_cast<long long>(id));
  EXACTLY_CHECK(max_tokens > 0, "request %lld asks for %lld tokens", static_cast<long long>(id),
                static_cast<long long>(max_tokens));
  Request r;
  r.id = id;
  r.num_prompt_tokens = static_cast<int64_t>(prompt.size());
  r.tokens = std::move(prompt);
  r.max_tokens = max_tokens;
  r.priority = priority;
  return r;
}

}  // namespace exactly
