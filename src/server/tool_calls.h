// Tool calls on /v1/chat/completions: `tools`, `tool_choice` and
// `parallel_tool_calls` read and checked; the grammar that makes a call
// when one is required; the calls found in the model's text.
//
// The call format the model is asked for, and that a forced call is
// generated in, is a JSON object {"name": ..., "arguments": {...}} (an array
// of them when parallel calls are allowed). Found in free text (`auto`):
// Hermes' and Qwen's `<tool_call>{...}</tool_call>` blocks (SmolLM2 writes
// a list inside one), or the whole answer being Llama 3.1's
// {"name": ..., "parameters": {...}}.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "constrain/grammar_cache.h"

namespace exactly::server {

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ToolRequest {
  nlohmann::ordered_json tools;     // the request's tools, as sent (for the chat template)
  std::vector<std::string> names;   // [tools] function names
  std::vector<std::string> schemas;  // [tools] parameters schemas, serialized in the client's order
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;  // kNamed: the function
  bool parallel = true;
};

// nullopt when the request has no tools; throws RequestError naming the
// field when tools, tool_choice or parallel_tool_calls are malformed.
std::optional<ToolRequest> parse_tools(const nlohmann::ordered_json& body);

// The grammar of the one call `required` or a named function makes.
GrammarSpec forced_call_grammar(const ToolRequest& tools);

struct FoundCalls {
  std::optional<std::string> content;  // the text outside the calls, or none
  nlohmann::json calls = nlohmann::json::array();  // OpenAI's tool_calls entries
};

// The calls in a finished answer: the whole text when a call was forced,
// the model's own formats under `auto`. Names the request did not offer are
// not calls; the text then stays content.
FoundCalls find_tool_calls(const std::string& text, ToolChoice choice, const std::vector<std::string>& names,
                           bool parallel);

// How many leading bytes of an unfinished answer under `auto` are certain to
// begin the content that find_tool_calls will give the whole answer: the text
// before any <tool_call>, without its trailing whitespace or a trailing start
// of "<tool_call>"; none while the answer could still be a call as a whole
// (it starts with '{' or '[') or starts with whitespace. A stream sends that
// much as it comes, so its deltas add up to the whole answer's content.
// `sent` (what an earlier call returned for a prefix of this text) spares
// scanning again the text already known to hold no marker.
size_t streamable_content(const std::string& text, size_t sent = 0);

// Tools described in a system message, for chat templates that render none.
std::string tools_system_text(const nlohmann::ordered_json& tools);

}  // namespace exactly::server
