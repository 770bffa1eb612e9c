// Chat messages → prompt tokens through the model's chat template.
#pragma once

#include <cstdint>
#include <optional>
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
// templates that do not render them. `template_kwargs` (null: none; from
// chat_template_kwargs) are further variables of the template.
std::vector<int32_t> chat_prompt_tokens(const nlohmann::json& messages, const Tokenizer& tok,
                                        const nlohmann::ordered_json* tools = nullptr,
                                        const nlohmann::ordered_json* template_kwargs = nullptr);

// The rendered text alone (no tokenizing), with or without the generation
// prompt; validates and throws as chat_prompt_tokens does.
std::string chat_prompt_text(const nlohmann::json& messages, const Tokenizer& tok, bool add_generation_prompt,
                             const nlohmann::ordered_json* tools = nullptr,
                             const nlohmann::ordered_json* template_kwargs = nullptr);

// vLLM's chat_template_kwargs of a request body (an object of variables for
// the chat template, such as Qwen3's enable_thinking): nullopt when absent or
// null; throws RequestError naming the field when it is not an object or sets
// a variable the server sets (messages, tools, add_generation_prompt,
// bos_token, eos_token).
std::optional<nlohmann::ordered_json> chat_template_kwargs(const nlohmann::json& body);

}  // namespace exactly::server
