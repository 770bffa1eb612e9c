#include "server/routes.h"

#include <ctime>
#include <random>

#include <nlohmann/json.hpp>

#include "core/format.h"
#include "server/chat_page.h"

namespace exactly::server {

using nlohmann::json;

namespace {

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

// Compares without an early exit, so the time taken does not tell how much of a key matched.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

}  // namespace

Route find_route(std::string_view method, std::string_view target) {
  struct Entry {
    std::string_view path, method;
    Route route;
  };
  static constexpr Entry kRoutes[] = {{"/", "GET", Route::kChatPage},
                                      {"/health", "GET", Route::kHealth},
                                      {"/metrics", "GET", Route::kMetrics},
                                      {"/v1/models", "GET", Route::kModels},
                                      {"/v1/completions", "POST", Route::kCompletions},
                                      {"/v1/chat/completions", "POST", Route::kChat},
                                      {"/tokenize", "POST", Route::kTokenize},
                                      {"/detokenize", "POST", Route::kDetokenize}};
  const std::string_view path = path_of(target);
  for (const Entry& e : kRoutes)
    if (e.path == path) return e.method == method ? e.route : Route::kWrongMethod;
  return Route::kNotFound;
}

// The key guards the API: /v1/ and vLLM's /tokenize and /detokenize.
bool guarded(std::string_view path) { return path.starts_with("/v1/") || path == "/tokenize" || path == "/detokenize"; }

bool authorized(std::string_view target, std::string_view authorization, const std::string& api_key) {
  if (api_key.empty() || !guarded(path_of(target))) return true;
  return same_secret(authorization, "Bearer " + api_key);
}

HttpReply unauthorized_reply() {
  return error_reply(ApiError{401, "a valid API key is required: send 'Authorization: Bearer KEY'",
                              "invalid_request_error", "", "invalid_api_key"});
}

HttpReply no_route_reply(Route route, std::string_view method, std::string_view target) {
  const std::string what = std::string(method) + " " + std::string(path_of(target));
  if (route == Route::kWrongMethod) {
    HttpReply r = error_reply(ApiError{405, "method not allowed: " + what, "invalid_request_error", "", ""});
    const std::string_view path = path_of(target);
    const bool post = path.starts_with("/v1/c") || path == "/tokenize" || path == "/detokenize";
    r.extra_headers = post ? "Allow: POST\r\n" : "Allow: GET\r\n";
    return r;
  }
  return error_reply(ApiError{404, "no route for " + what, "invalid_request_error", "", ""});
}

// The page loads nothing from elsewhere, and the policy says so to the
// browser: its style, requests to this server only, and only the script
// carrying this reply's nonce, so markup that model output might smuggle into
// the page (an inline handler, a script element) never runs.
HttpReply chat_page_reply() {
  std::random_device entropy;
  const std::string nonce = std::to_string(entropy()) + std::to_string(entropy()) + std::to_string(entropy());
  std::string page(chat_page_html());
  const size_t at = page.find(kChatPageNonceSlot);
  page.replace(at, kChatPageNonceSlot.size(), nonce);
  return HttpReply{200, "text/html; charset=utf-8", std::move(page),
                   "Cache-Control: no-cache\r\n"
                   "Content-Security-Policy: default-src 'none'; script-src 'nonce-" + nonce +
                       "'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; "
                       "frame-ancestors 'none'\r\n"};
}

HttpReply health_reply() { return json_reply(200, R"({"status":"ok"})"); }

HttpReply metrics_reply(const MetricsBoard& metrics, const HttpCounters& counters, const GrammarCache* grammars,
                        const std::string& model_name) {
  HttpReply r{200, "text/plain; version=0.0.4", metrics.read().prometheus_text(model_name), ""};
  counters.render(r.body);
  if (grammars != nullptr) {
    const GrammarCacheStats g = grammars->stats();
    r.body += strformat(
        "# HELP exactly_grammar_compiles_total Structured-output grammars compiled (cache misses).\n"
        "# TYPE exactly_grammar_compiles_total counter\nexactly_grammar_compiles_total %lld\n"
        "# HELP exactly_grammar_cache_hits_total Structured-output grammars found compiled in the cache.\n"
        "# TYPE exactly_grammar_cache_hits_total counter\nexactly_grammar_cache_hits_total %lld\n"
        "# HELP exactly_grammar_compile_seconds_total Time spent compiling grammars.\n"
        "# TYPE exactly_grammar_compile_seconds_total counter\nexactly_grammar_compile_seconds_total %.6f\n",
        static_cast<long long>(g.compiles), static_cast<long long>(g.hits), g.compile_seconds);
  }
  return r;
}

HttpReply models_reply(const std::string& model_name, int32_t max_model_len) {
  json model = {{"id", model_name}, {"object", "model"}, {"created", std::time(nullptr)},
                {"owned_by", "exactly"}, {"max_model_len", max_model_len}};
  return json_reply(200, json{{"object", "list"}, {"data", json::array({model})}}.dump());
}

}  // namespace exactly::server
