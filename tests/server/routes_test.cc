// Routing and the API key: which handler a request reaches, and which paths
// the key guards (/v1/ only; /health and /metrics are open by design).
#include "server/routes.h"

#include <gtest/gtest.h>

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
