// The server's routes: which handler a method and path reach, the API key
// check of /v1/ routes, and the replies of the routes that need no engine.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "constrain/grammar_cache.h"
#include "server/http_counters.h"
#include "server/http_response.h"
#include "server/metrics.h"

namespace exactly::server {

enum class Route {
  kChatPage, kHealth, kMetrics, kModels, kCompletions, kChat, kTokenize, kDetokenize, kWrongMethod, kNotFound
};

// `target` may carry a query string, which no route reads.
Route find_route(std::string_view method, std::string_view target);

// Whether the request may proceed: /v1/ routes need "Authorization: Bearer
// KEY" when the server has a key; the chat page, /health and /metrics never
// do (the page sends the key it is given with its own /v1/ requests).
bool authorized(std::string_view target, std::string_view authorization, const std::string& api_key);

HttpReply unauthorized_reply();
HttpReply no_route_reply(Route route, std::string_view method, std::string_view target);
HttpReply chat_page_reply();
HttpReply health_reply();
// `grammars` may be null (no grammar engine): its counters are left out.
HttpReply metrics_reply(const MetricsBoard& metrics, const HttpCounters& counters, const GrammarCache* grammars,
                        const std::string& model_name);
HttpReply models_reply(const std::string& model_name, int32_t max_model_len);

}  // namespace exactly::server
