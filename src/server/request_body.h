// A request body → JSON, with the limits every body is held to before any
// recursive code (copies, template values, dumps) walks it: no NUL byte (the
// JSON lexer would stop there and accept the part before it), nesting at most
// kMaxJsonDepth deep, numbers that fit a double, nothing after the value.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace exactly::server {

inline constexpr int kMaxJsonDepth = 128;

// Throws RequestError (param empty) whose message says what is wrong and
// where (the byte offset).
nlohmann::json parse_request_body(std::string_view body);

// An endpoint's body: parse_request_body's JSON, which must be an object;
// throws ApiError 400 (OpenAI's shape) saying which of the two it is not.
nlohmann::json parse_api_body(std::string_view body);

}  // namespace exactly::server
