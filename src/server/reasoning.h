// vLLM's reasoning parsers for /v1/chat/completions (`exactly serve
// --reasoning-parser NAME`): a reasoning model's thinking, between <think>
// and </think>, is returned as the message's `reasoning_content` and the
// rest as its `content` (tool calls are looked for in the content only).
//   deepseek_r1: the chat template opens <think> itself, so the answer starts
//     inside the reasoning (an opening tag the model writes is dropped); with
//     no </think> the whole answer is reasoning.
//   qwen3: reasoning only where the answer opens with <think>; with no
//     closing tag after it, the whole answer is reasoning; otherwise all is content.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace exactly::server {

enum class ReasoningParser { kNone, kDeepseekR1, kQwen3 };

// "deepseek_r1", "qwen3" or empty (none); throws Error (usage) naming others.
ReasoningParser parse_reasoning_parser(const std::string& name);

// Where the reasoning and the content of an answer lie: [reasoning_begin,
// reasoning_end) and [content_begin, end of text); for an unfinished answer,
// only what no later text can change (a trailing start of a tag is held
// back, and nothing is decided while the opening tag may still come).
struct ReasoningSplit {
  bool has_reasoning = false;
  size_t reasoning_begin = 0, reasoning_end = 0;
  size_t content_begin = 0;
  bool content_settled = true;  // false while the text may still be reasoning: no content yet
};

// `settled` (reasoning bytes an earlier split of a prefix of this text gave)
// spares scanning again the reasoning already known to hold no closing tag.
ReasoningSplit split_reasoning(const std::string& text, ReasoningParser parser, bool finished, size_t settled = 0);

}  // namespace exactly::server
