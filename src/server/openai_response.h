// Accumulates one HTTP request's engine outputs and writes them in OpenAI's
// shapes: completions (text_completion) or chat (chat.completion), whole or
// as streaming chunks. Choice i*n+j is sample j of prompt i, as OpenAI numbers
// the choices of a batched prompt.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/request_queue.h"
#include "server/reasoning.h"
#include "server/tool_calls.h"
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
  // Completions with echo and logprobs: the logprobs object covers the
  // prompt's tokens too (null for the first), as OpenAI's legacy API does.
  bool echo_logprobs = false;
  bool prompt_logprobs = false;   // vLLM's prompt_logprobs field in each choice
  bool return_token_ids = false;  // vLLM's prompt_token_ids and token_ids in each choice
  std::vector<std::vector<int32_t>> prompt_ids;  // [num_prompts]
  // Chat with tools: the answer is searched for calls (find_tool_calls),
  // and a stream holds its text back until the answer ends.
  ToolChoice tool_choice = ToolChoice::kNone;
  std::vector<std::string> tool_names;
  bool parallel_tool_calls = true;
  // Chat: the answer's reasoning goes to `reasoning_content` (server/reasoning.h).
  ReasoningParser reasoning = ReasoningParser::kNone;
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
    size_t streamed = 0;            // bytes of the content already sent while its text is parsed
    size_t streamed_reasoning = 0;  // bytes of the reasoning already sent
    std::vector<int32_t> token_ids;
    std::vector<TokenLogprobs> logprobs;
    std::string finish_reason;
  };
  struct PromptState {
    bool finished = false;
    int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
    std::vector<std::optional<TokenLogprobs>> prompt_logprobs;  // once the engine scored the prompt
  };

  nlohmann::json chunk(nlohmann::json choices) const;
  void parsed_chat_chunks(Choice& c, size_t index, bool finished, std::vector<nlohmann::json>& chunks);
  nlohmann::json logprobs_json(const std::vector<TokenLogprobs>& lps, size_t text_offset) const;
  // A prompt's opening in a stream: its echo (with the prompt's logprobs when
  // asked), its prompt_logprobs and prompt_token_ids, for each of its choices.
  std::vector<nlohmann::json> prompt_chunks(size_t prompt) const;
  // The extra fields a choice carries: prompt_logprobs, prompt_token_ids.
  void add_prompt_fields(nlohmann::json& choice, size_t prompt) const;
  // Whether the stream's prompt chunks wait for the engine's prompt logprobs.
  bool prompt_waits_for_scores() const { return shape_.echo_logprobs || shape_.prompt_logprobs; }

  ResponseShape shape_;
  const Tokenizer& tok_;
  std::string id_;
  int64_t created_;
  std::vector<Choice> choices_;       // [num_prompts * n]
  std::vector<PromptState> prompts_;  // [num_prompts]
};

}  // namespace exactly::server
