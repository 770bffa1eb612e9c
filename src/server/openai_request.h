// OpenAI request objects (completions and chat) → engine requests, and a
// finished completions request → OpenAI-shaped JSON. Shared by `exactly batch`
// and `exactly serve`, so both read a request the same way.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/request_params.h"
#include "tokenizer/tokenizer.h"

namespace exactly::server {

// A field with a wrong type or value. `param` names the field, as OpenAI's
// error object does; the message is prefixed with `where` when it is not empty.
class RequestError : public Error {
 public:
  RequestError(const std::string& message, std::string param)
      : Error(message, ExitCode::kBadInput), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

// Sampling, stopping, n, seed, priority, user and prompt_logprobs fields,
// common to both endpoints. Starts from OpenAI's defaults (temperature 1, top_p 1, no top-k
// or min-p). Leaves prompt, max_tokens and logprobs to the caller, because
// completions and chat read those differently.
RequestParams parse_generation_fields(const nlohmann::json& body, const std::string& where);

// logit_bias: an object from token ids (decimal strings) to biases in
// [-100, 100], at most one entry per token of the vocabulary.
LogitBias parse_logit_bias(const nlohmann::json& body, int32_t vocab_size, const std::string& where);

// max_tokens, or chat's newer max_completion_tokens; nullopt when absent.
std::optional<int64_t> parse_max_tokens(const nlohmann::json& body, const std::string& where);

// A completions prompt: a string, token ids, a list of strings or a list of
// token-id lists. Returns one token list per prompt (BOS added to text prompts
// when the model asks for it). Batches are refused unless allow_batch.
std::vector<std::vector<int32_t>> parse_prompts(const nlohmann::json& body, const Tokenizer& tok,
                                                int32_t vocab_size, bool allow_batch, const std::string& where);

// One whole completions request with a single prompt (`exactly batch`).
// Throws RequestError naming `where` and the field, also for `tools`, which
// only the server implements. Structured output is the caller's to read
// (parse_request_constraint): its grammar engine is not this function's.
RequestParams parse_completion_request(const nlohmann::json& body, const Tokenizer& tok, int32_t vocab_size,
                                       const std::string& where);

// The completions `logprobs` field: an integer 0..20, or -1 when absent.
int32_t parse_completion_logprobs(const nlohmann::json& body, const std::string& where);

// A finished request's accumulated completions.
struct FinishedCompletion {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobs> logprobs;
  std::string finish_reason;
};

// `exactly batch`'s result line for one request; `prompt_logprobs` when the
// request asked for them (else empty).
nlohmann::json completion_result_json(size_t index, const std::vector<FinishedCompletion>& choices,
                                      const RequestOutput& last, bool with_logprobs,
                                      const std::vector<std::optional<TokenLogprobs>>& prompt_logprobs,
                                      const Tokenizer& tok);

// vLLM's prompt_logprobs: null for the first token, then for each token an
// object keyed by token id (the prompt's token and its top-N alternatives)
// of {"logprob", "rank", "decoded_token"}.
nlohmann::json prompt_logprobs_json(const std::vector<std::optional<TokenLogprobs>>& prompt, const Tokenizer& tok);

// OpenAI's completions logprobs object for some tokens.
nlohmann::json completion_logprobs_json(const std::vector<TokenLogprobs>& logprobs, const Tokenizer& tok,
                                        size_t text_offset);

}  // namespace exactly::server
