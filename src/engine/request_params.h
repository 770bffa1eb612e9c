// What a client asks of the engine for one request, and what it gets back.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/output_constraint.h"
#include "sample/sampler.h"
#include "sample/sampling_params.h"

namespace exactly {

using ClientRequestId = uint64_t;

struct RequestParams {
  std::vector<int32_t> prompt;          // [n_prompt] token ids, BOS included if wanted
  SamplingParams sampling;
  int64_t max_tokens = 16;
  int32_t n = 1;                        // parallel samples sharing the prompt's KV
  std::vector<std::string> stop;        // stop strings, excluded from the output
  std::vector<int32_t> stop_token_ids;  // extra stop tokens
  bool ignore_eos = false;
  // The text of special tokens (<|im_start|>, a chat format's markers) is
  // left out of the output, as vLLM's default; false writes it.
  bool skip_special_tokens = true;
  int32_t logprobs = -1;                // <0: none; else top-N alternatives per token
  // <0: none; else the logprob of every prompt token after the first (from
  // the logits of the position before it) with top-N alternatives. The
  // prompt is then computed whole (no prefix-cache hit), in chunks of at
  // most kPromptLogprobChunk tokens.
  int32_t prompt_logprobs = -1;
  int32_t priority = 0;                 // lower runs first
  LogitBias logit_bias;                 // added to the row's logits before sampling
  // The grammar the output follows, or none. A constrained or biased
  // request's rows are sampled on the host and it is never drafted for.
  std::shared_ptr<const Constraint> constraint;
};

enum class FinishReason { kStop, kLength, kAbort };
const char* to_string(FinishReason reason);

// What one request gained in one step (deltas), per completion.
struct CompletionDelta {
  int32_t index = 0;                     // which of the n samples
  std::vector<int32_t> token_ids;        // new tokens (a stop token is not reported)
  std::string text;                      // new text, UTF-8 complete, stop strings removed
  std::vector<TokenLogprobs> logprobs;   // one per new token when requested
  std::optional<FinishReason> finish_reason;
};

inline constexpr int64_t kPromptLogprobChunk = 512;
inline constexpr int32_t kMaxLogprobs = 20;  // top-N alternatives at most, as OpenAI allows

struct RequestOutput {
  ClientRequestId id = 0;
  std::vector<CompletionDelta> completions;
  // [prompt tokens] when prompt_logprobs was asked, in the first output after
  // the whole prompt was scored (the first entry is empty: nothing precedes
  // the first token); empty in every other output.
  std::vector<std::optional<TokenLogprobs>> prompt_logprobs;
  bool finished = false;                 // every completion has finished
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;      // prompt tokens found in the prefix cache
  int64_t completion_tokens = 0;         // over all completions, so far
  // When the request was first scheduled (the end of its wait in the queue);
  // the epoch until then.
  std::chrono::steady_clock::time_point first_scheduled{};
};

}  // namespace exactly
