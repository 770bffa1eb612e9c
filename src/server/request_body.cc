#include "server/request_body.h"

#include <cstring>

#include "core/format.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace exactly::server {

using nlohmann::json;

namespace {

[[noreturn]] void refuse(const std::string& why) { throw RequestError(why, ""); }

}  // namespace

json parse_request_body(std::string_view body) {
  if (const void* nul = std::memchr(body.data(), '\0', body.size()))
    refuse(strformat("a NUL byte at offset %zu", static_cast<size_t>(static_cast<const char*>(nul) - body.data())));
  // The parser itself keeps its nesting on a heap stack; the callback stops it
  // before a value deeper than the limit exists, so nothing recursive ever
  // meets one.
  const json::parser_callback_t depth_guard = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      refuse(strformat("objects and arrays nest more than %d deep", kMaxJsonDepth));
    return true;
  };
  try {
    return json::parse(body.begin(), body.end(), depth_guard);
  } catch (const json::exception& e) {  // syntax errors, and numbers out of a double's range
    refuse(e.what());
  }
}

nlohmann::json parse_api_body(std::string_view text) {
  nlohmann::json body;
  try {
    body = parse_request_body(text);
  } catch (const RequestError& e) {
    throw ApiError{400, std::string("the body is not valid JSON: ") + e.what(), "invalid_request_error", "", ""};
  }
  if (!body.is_object()) throw ApiError{400, "the body must be a JSON object", "invalid_request_error", "", ""};
  return body;
}

}  // namespace exactly::server
