// vLLM's /tokenize and /detokenize, in its request and response shapes:
//   POST /tokenize   {"prompt": text, "add_special_tokens": true, "return_token_strs": false}
//                 or {"messages": [...], "add_generation_prompt": true, "add_special_tokens": false, ...}
//                 -> {"count", "max_model_len", "tokens", "token_strs"}
//   POST /detokenize {"tokens": [ids]} -> {"prompt": text}
// Unknown fields are refused as on the generation endpoints.
#pragma once

#include <string_view>

#include "server/generation_request.h"
#include "server/http_response.h"

namespace exactly::server {

// The reply, an error in OpenAI's shape for a bad request.
HttpReply tokenize_reply(std::string_view body, const ServedModel& model);
HttpReply detokenize_reply(std::string_view body, const ServedModel& model);

}  // namespace exactly::server
