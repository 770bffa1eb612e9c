// Chat messages → prompt tokens through the model's chat template.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace exactly::server {

// Validates `messages` (a non-empty array of {role, content} objects; content
// a string, null, or an array of text parts), renders the template with the
// generation prompt and encodes it with special tokens parsed. Throws
// RequestError naming "messages" for malformed input or a template failure.
// `tools` (null: none) go to the template as its `tools` variable when it
// reads one, else into the system message (tools_system_text); assistant
// `tool_calls` are written into the content as <tool_call> blocks for
// templates that do not render them.
std::vector<int32_t> chat_prompt_tokens(const nlohmann::json& messages, const Tokenizer& tok,
                                        const nlohmann::ordered_json* tools = nullptr);

// The rendered text alone (no tokenizing), with or without the generation
// prompt; validates and throws as chat_prompt_tokens does.
std::string chat_prompt_text(const nlohmann::json& messages, const Tokenizer& tok, bool add_generation_prompt,
                             const nlohmann::ordered_json* tools = nullptr);

}  // namespace exactly::server
