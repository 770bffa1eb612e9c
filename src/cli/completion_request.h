// OpenAI completions request objects (one JSON object) → engine requests, and
// engine results → OpenAI-shaped JSON. Used by `exactly batch`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "engine/request_params.h"
#include "tokenizer/tokenizer.h"

namespace exactly::cli {

// Parses one request. Throws Error(kBadInput) naming `where` and the field
// when a field has the wrong type or an invalid value.
RequestParams parse_completion_request(const nlohmann::json& body, const Tokenizer& tok, int32_t vocab_size,
                                       const std::string& where);

// A finished request's accumulated completions.
struct FinishedCompletion {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobs> logprobs;
  std::string finish_reason;
};

nlohmann::json completion_result_json(size_t index, const std::vector<FinishedCompletion>& choices,
                                      const RequestOutput& last, bool with_logprobs, const Tokenizer& tok);

}  // namespace exactly::cli
