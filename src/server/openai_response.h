// Accumulates one HTTP request's engine outputs and writes them in OpenAI's
// shapes: completions (text_completion) or chat (chat.completion), whole or
// as streaming chunks. Choice i*n+j is sample j of prompt i, as OpenAI numbers
// the choices of a batched prompt.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request_queue.h"
#include "tokenizer/tokenizer.h"

namespace exactly::server {

enum class Endpoint { kCompletions, kChat };

struct ResponseShape {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  size_t num_prompts = 1;
  int32_t n = 1;
  bool logprobs = false;
  std::vector<std::string> echo;  // [num_prompts] text put before each prompt's completions, or empty
};

class OpenAIResponse {
 public:
  OpenAIResponse(ResponseShape shape, const Tokenizer& tok);

  // Folds an output in; returns the streaming chunks it makes (possibly none).
  std::vector<nlohmann::json> absorb(const ChannelEvent& event);
  // The first chunks of a stream: the assistant role for chat, the echo for completions.
  std::vector<nlohmann::json> opening_chunks() const;
  bool finished() const;
  // Marks every unfinished choice "abort" (the engine stopped it without a reason).
  void abort_unfinished();

  nlohmann::json whole() const;      // the non-streaming response
  nlohmann::json usage() const;
  nlohmann::json usage_chunk() const;  // the last chunk when stream_options.include_usage

 private:
  struct Choice {
    std::string text;
    std::vector<TokenLogprobs> logprobs;
    std::string finish_reason;
  };
  struct PromptState {
    bool finished = false;
    int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  };

  nlohmann::json chunk(nlohmann::json choices) const;
  nlohmann::json logprobs_json(const std::vector<TokenLogprobs>& lps, size_t text_offset) const;

  ResponseShape shape_;
  const Tokenizer& tok_;
  std::string id_;
  int64_t created_;
  std::vector<Choice> choices_;       // [num_prompts * n]
  std::vector<PromptState> prompts_;  // [num_prompts]
};

}  // namespace exactly::server
