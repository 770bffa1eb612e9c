#include "server/request_fields.h"

#include <algorithm>

#include "server/openai_request.h"

namespace exactly::server {

using nlohmann::json;

namespace {

// Read by both endpoints: sampling, stopping, n, seeds, priorities (vLLM's
// extensions included: top_k, min_p, repetition_penalty, stop_token_ids,
// ignore_eos, skip_special_tokens, priority, prompt_logprobs,
// return_token_ids), logit_bias and
// structured output (OpenAI's response_format, vLLM's structured_outputs and
// guided_* names).
#define EXACTLY_COMMON_FIELDS                                                                              \
  "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", \
      "repetition_penalty", "n", "best_of", "seed", "stop", "stop_token_ids", "ignore_eos",                 \
      "skip_special_tokens", "stream",                                                                        \
      "stream_options", "user", "priority", "prompt_logprobs", "return_token_ids", "logit_bias",            \
      "response_format", "structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar"

constexpr std::string_view kCompletionFields[] = {EXACTLY_COMMON_FIELDS, "prompt", "logprobs", "echo"};
constexpr std::string_view kChatFields[] = {EXACTLY_COMMON_FIELDS, "messages", "max_completion_tokens", "logprobs",
                                            "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
                                            "chat_template_kwargs"};
constexpr std::string_view kStreamOptions[] = {"include_usage"};

#undef EXACTLY_COMMON_FIELDS

bool listed(std::span<const std::string_view> list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

// A key may hold any bytes; the message quotes at most its first 64.
std::string quoted(const std::string& key) { return "'" + (key.size() > 64 ? key.substr(0, 64) + "..." : key) + "'"; }

}  // namespace

std::span<const std::string_view> accepted_fields(Endpoint endpoint) {
  if (endpoint == Endpoint::kChat) return kChatFields;
  return kCompletionFields;
}

void check_fields(Endpoint endpoint, const json& body) {
  const auto accepted = accepted_fields(endpoint);
  for (const auto& [key, value] : body.items()) {
    if (!listed(accepted, key))
      throw RequestError("field " + quoted(key) + " is not supported by this server" +
                             (endpoint == Endpoint::kChat ? " on /v1/chat/completions" : " on /v1/completions"),
                         key);
  }
  if (auto so = body.find("stream_options"); so != body.end() && so->is_object()) {
    for (const auto& [key, value] : so->items())
      if (!listed(kStreamOptions, key))
        throw RequestError("field 'stream_options' has a member " + quoted(key) + " that is not supported",
                           "stream_options");
  }
  // best_of > n would return the best n of best_of samples, which this
  // server does not rank; best_of equal to n is what it does anyway.
  if (auto b = body.find("best_of"); b != body.end() && !b->is_null()) {
    if (!b->is_number_integer()) throw RequestError("field 'best_of' must be an integer", "best_of");
    const auto n = body.find("n");
    const json n_value = n == body.end() || n->is_null() ? json(1) : *n;
    if (*b != n_value)
      throw RequestError("field 'best_of' must equal 'n' (ranking best_of samples is not supported)", "best_of");
  }
}

}  // namespace exactly::server
