// A generation request's body → what the engine is asked to do and how the
// answer is shaped. No HTTP and no engine here: the server calls it on a
// worker thread, the request fuzzer calls it directly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/grammar_cache.h"
#include "engine/request_params.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace exactly::server {

// What request parsing needs to know of the served model.
struct ServedModel {
  const Tokenizer& tok;
  int32_t vocab_size = 0;
  int32_t max_model_len = 0;
  std::vector<std::string> names;  // names a request's "model" may use; the first is reported
  GrammarCache* grammars = nullptr;  // compiles structured-output grammars; none: they are refused
  ReasoningParser reasoning = ReasoningParser::kNone;  // how chat answers' reasoning is returned
};

// Compiled grammars kept for later requests, at most this many bytes.
inline constexpr int64_t kGrammarCacheBytes = int64_t{256} << 20;

struct GenerationRequest {
  std::vector<RequestParams> prompts;  // one engine request per prompt
  ResponseShape shape;
  bool stream = false;
  bool include_usage = false;
};

// Parses, validates, renders the chat template and tokenizes. Throws ApiError
// (4xx, OpenAI's shape) for anything the client got wrong; any other
// exception is the server's own fault.
GenerationRequest parse_generation_request(Endpoint endpoint, std::string_view body, const ServedModel& model);

}  // namespace exactly::server
