// POST /v1/completions and /v1/chat/completions: validate on the HTTP thread,
// hand the request to the engine thread, then answer whole or as a stream of
// server-sent events. Throws ApiError for anything the client got wrong.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include <httplib.h>

#include "server/openai_response.h"
#include "server/request_queue.h"
#include "tokenizer/tokenizer.h"

namespace exactly::server {

struct GenerationContext {
  const Tokenizer& tok;
  int32_t vocab_size = 0;
  int32_t max_model_len = 0;
  std::vector<std::string> model_names;  // names a request's "model" may use; the first is reported
  EngineInbox& inbox;
  size_t max_queued = 256;
};

void handle_generation(Endpoint endpoint, const httplib::Request& req, httplib::Response& res,
                       const GenerationContext& ctx);

}  // namespace exactly::server
