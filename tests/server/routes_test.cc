// Routing and the API key: which handler a request reaches, and which paths
// the key guards (/v1/ only; /health and /metrics are open by design).
#include "server/routes.h"

#include <gtest/gtest.h>

#include "server/chat_page.h"

namespace exactly::server {
namespace {

TEST(Routes, MethodAndPathPickTheHandlerAndQueriesAreIgnored) {
  EXPECT_EQ(find_route("GET", "/health"), Route::kHealth);
  EXPECT_EQ(find_route("GET", "/metrics?x=1"), Route::kMetrics);
  EXPECT_EQ(find_route("POST", "/v1/chat/completions"), Route::kChat);
  EXPECT_EQ(find_route("POST", "/v1/completions"), Route::kCompletions);
  EXPECT_EQ(find_route("GET", "/v1/completions"), Route::kWrongMethod);
  EXPECT_EQ(find_route("GET", "/v1/completions/"), Route::kNotFound);
  EXPECT_EQ(find_route("GET", "/health/../v1/models"), Route::kNotFound);
  EXPECT_EQ(find_route("GET", "/"), Route::kChatPage);
  EXPECT_EQ(find_route("GET", "/?session=1"), Route::kChatPage);
  EXPECT_EQ(find_route("POST", "/"), Route::kWrongMethod);
  EXPECT_EQ(find_route("GET", "/index.html"), Route::kNotFound);
}

// The page is whole and self-contained: it is HTML, it talks to this
// server's chat endpoint, and it loads nothing from another origin.
TEST(Routes, TheChatPageIsCompiledInAndLoadsNothingFromElsewhere) {
  const HttpReply r = chat_page_reply();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_TRUE(r.body.starts_with("<!doctype html>"));
  EXPECT_TRUE(r.body.ends_with("</html>\n"));
  EXPECT_NE(r.body.find("/v1/chat/completions"), std::string::npos);
  for (const char* external : {"http://", "https://", "src=", "href=", "@import", "url("})
    EXPECT_EQ(r.body.find(external), std::string::npos) << external;
  EXPECT_NE(r.extra_headers.find("Content-Security-Policy: default-src 'none'"), std::string::npos);
}

// Only the page's own script may run: the policy names a nonce, the page's
// one script element carries it, no other script may run (no
// 'unsafe-inline'), and each reply has a nonce of its own.
TEST(Routes, TheChatPageRunsOnlyItsOwnScript) {
  auto nonce_of = [](const HttpReply& r) {
    const std::string key = "script-src 'nonce-";
    const size_t at = r.extra_headers.find(key);
    if (at == std::string::npos) return std::string();
    const size_t from = at + key.size();
    return r.extra_headers.substr(from, r.extra_headers.find('\'', from) - from);
  };
  const HttpReply a = chat_page_reply(), b = chat_page_reply();
  const std::string nonce = nonce_of(a);
  ASSERT_GE(nonce.size(), 16u);
  EXPECT_NE(nonce, nonce_of(b));
  const size_t inline_at = a.extra_headers.find("'unsafe-inline'");  // for the style element alone
  EXPECT_EQ(inline_at, a.extra_headers.find("style-src 'unsafe-inline'") + 10);
  EXPECT_EQ(a.extra_headers.find("'unsafe-inline'", inline_at + 1), std::string::npos);
  EXPECT_NE(a.body.find("<script nonce=\"" + nonce + "\">"), std::string::npos);
  size_t scripts = 0;
  for (size_t at = a.body.find("<script"); at != std::string::npos; at = a.body.find("<script", at + 1)) ++scripts;
  EXPECT_EQ(scripts, 1u);
  EXPECT_EQ(a.body.find(kChatPageNonceSlot), std::string::npos);
}

TEST(Routes, TheKeyGuardsV1Only) {
  EXPECT_TRUE(authorized("/v1/models", "", ""));  // no key configured
  EXPECT_FALSE(authorized("/v1/models", "", "k"));
  EXPECT_FALSE(authorized("/v1/models", "Bearer x", "k"));
  EXPECT_FALSE(authorized("/v1/models", "Bearer kk", "k"));
  EXPECT_FALSE(authorized("/v1/models", "Bearer ", "k"));
  EXPECT_TRUE(authorized("/v1/models", "Bearer k", "k"));
  EXPECT_TRUE(authorized("/health", "", "k"));
  EXPECT_TRUE(authorized("/metrics", "", "k"));
  EXPECT_TRUE(authorized("/", "", "k"));  // the page; its own /v1/ requests carry the key
}

}  // namespace
}  // namespace exactly::server
