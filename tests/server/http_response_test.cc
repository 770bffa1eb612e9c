// The bytes of the server's responses, read back as an HTTP/1.1 client would.
#include "server/http_response.h"

#include <gtest/gtest.h>

namespace exactly::server {
namespace {

TEST(HttpResponse, AWholeReplyCarriesItsLengthConnectionAndRequestId) {
  const std::string bytes = serialize_reply(json_reply(200, R"({"a":1})"), false, "r-1");
  EXPECT_EQ(bytes,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\nConnection: close\r\n"
            "x-request-id: r-1\r\n\r\n{\"a\":1}");
}

TEST(HttpResponse, ErrorsAreInOpenAIsShape) {
  const HttpReply r = error_reply(ApiError{413, "too big", "invalid_request_error", "", "request_too_large"});
  EXPECT_EQ(r.status, 413);
  const auto err = nlohmann::json::parse(r.body)["error"];
  EXPECT_EQ(err["message"], "too big");
  EXPECT_EQ(err["code"], "request_too_large");
  EXPECT_TRUE(err["param"].is_null());
  EXPECT_EQ(serialize_reply(r, true, "x").rfind("HTTP/1.1 413 Payload Too Large\r\n", 0), 0u);
}

TEST(HttpResponse, ChunksFrameTheirBytesAndAnEmptyOneIsNothing) {
  EXPECT_EQ(body_chunk("data: x\n\n"), "9\r\ndata: x\n\n\r\n");
  EXPECT_EQ(body_chunk(std::string(300, 'a')).substr(0, 5), "12c\r\n");
  EXPECT_EQ(body_chunk(""), "");  // an empty chunk would end the body
  EXPECT_EQ(last_chunk(), "0\r\n\r\n");
}

}  // namespace
}  // namespace exactly::server
