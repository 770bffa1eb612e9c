// The bytes of the server's HTTP/1.1 responses: whole replies with a
// Content-Length, the head of a chunked event stream and its chunks. Every
// response names its request id (x-request-id), which the server's log uses.
#pragma once

#include <string>
#include <string_view>

#include "server/api_error.h"

namespace exactly::server {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string extra_headers;  // complete "Name: value\r\n" lines, or empty
};

HttpReply json_reply(int status, std::string body);
// OpenAI's error shape.
HttpReply error_reply(const ApiError& e);

// A whole response. `keep_alive` false adds "Connection: close".
std::string serialize_reply(const HttpReply& reply, bool keep_alive, std::string_view request_id);

// The head of a server-sent event stream, sent with chunked transfer encoding.
std::string event_stream_head(bool keep_alive, std::string_view request_id);
// One chunk of a chunked body (empty data gives nothing: an empty chunk would end the body).
std::string body_chunk(std::string_view data);
// The chunk that ends a chunked body.
std::string_view last_chunk();

// "100 Continue", for clients that wait for it before sending a body.
std::string_view continue_response();

}  // namespace exactly::server
