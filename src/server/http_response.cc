#include "server/http_response.h"

#include "core/format.h"

namespace exactly::server {

namespace {

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status < 500 ? "Client Error" : "Server Error";
  }
}

std::string status_line(int status) { return strformat("HTTP/1.1 %d %s\r\n", status, reason(status)); }

std::string common_headers(bool keep_alive, std::string_view request_id) {
  std::string out = "Connection: ";
  out += keep_alive ? "keep-alive" : "close";
  out += "\r\nx-request-id: ";
  out += request_id;
  out += "\r\n";
  return out;
}

}  // namespace

HttpReply json_reply(int status, std::string body) { return HttpReply{status, "application/json", std::move(body), ""}; }

HttpReply error_reply(const ApiError& e) {
  return json_reply(e.status, e.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string serialize_reply(const HttpReply& reply, bool keep_alive, std::string_view request_id) {
  std::string out = status_line(reply.status);
  out += "Content-Type: " + reply.content_type + "\r\n";
  out += strformat("Content-Length: %zu\r\n", reply.body.size());
  out += common_headers(keep_alive, request_id);
  out += reply.extra_headers;
  out += "\r\n";
  out += reply.body;
  return out;
}

std::string event_stream_head(bool keep_alive, std::string_view request_id) {
  return status_line(200) +
         "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n" +
         common_headers(keep_alive, request_id) + "\r\n";
}

std::string body_chunk(std::string_view data) {
  if (data.empty()) return {};
  std::string out = strformat("%zx\r\n", data.size());
  out += data;
  out += "\r\n";
  return out;
}

std::string_view last_chunk() { return "0\r\n\r\n"; }

std::string_view continue_response() { return "HTTP/1.1 100 Continue\r\n\r\n"; }

}  // namespace exactly::server
