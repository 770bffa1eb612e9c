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
}

}  // namespace
}  // namespace exactly::server
