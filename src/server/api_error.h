// An HTTP error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace exactly::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, or empty
  std::string code;   // a machine-readable reason, or empty

  nlohmann::json to_json() const {
    auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
    return {{"error", {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
  }
};

}  // namespace exactly::server
