// Chat messages → prompt tokens through the model's chat template.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace exactly::server {

// Validates `messages` (a non-empty array of {role, content} objects; content
// a string, null, or an array of text parts), renders the template with the
// generation prompt and encodes it with special tokens parsed. Throws
// RequestError naming "messages" for malformed input or a template failure.
std::vector<int32_t> chat_prompt_tokens(const nlohmann::json& messages, const Tokenizer& tok);

}  // namespace exactly::server
