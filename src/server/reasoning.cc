#include "server/reasoning.h"

#include <algorithm>

#include "core/error.h"

namespace exactly::server {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// The length of the longest suffix of text that begins `tag` (a tag that may still be completing).
size_t partial_tag_at_end(const std::string& text, std::string_view tag) {
  for (size_t n = std::min(tag.size() - 1, text.size()); n > 0; --n)
    if (text.compare(text.size() - n, n, tag.data(), n) == 0) return n;
  return 0;
}

}  // namespace

ReasoningParser parse_reasoning_parser(const std::string& name) {
  if (name.empty()) return ReasoningParser::kNone;
  if (name == "deepseek_r1") return ReasoningParser::kDeepseekR1;
  if (name == "qwen3") return ReasoningParser::kQwen3;
  throw Error("--reasoning-parser: '" + name + "' is not one of deepseek_r1, qwen3", ExitCode::kUsage);
}

ReasoningSplit split_reasoning(const std::string& text, ReasoningParser parser, bool finished, size_t settled) {
  ReasoningSplit s;
  if (parser == ReasoningParser::kNone) return s;
  size_t begin = 0;
  const bool opens = text.compare(0, kOpen.size(), kOpen) == 0;
  if (parser == ReasoningParser::kQwen3) {
    if (!opens) {
      // Not yet decided while the text so far could still become "<think>".
      const bool may_open = !finished && text.size() < kOpen.size() && kOpen.compare(0, text.size(), text) == 0;
      s.content_settled = !may_open;
      s.content_begin = 0;
      return s;
    }
    begin = kOpen.size();
  } else if (opens) {
    begin = kOpen.size();
  } else if (!finished && text.size() < kOpen.size() && kOpen.compare(0, text.size(), text) == 0) {
    s.has_reasoning = true, s.content_settled = false;  // maybe an opening tag: hold it
    return s;
  }
  s.has_reasoning = true;
  s.reasoning_begin = begin;
  const size_t close = text.find(kClose, begin + settled);
  if (close != std::string::npos) {
    s.reasoning_end = close;
    s.content_begin = close + kClose.size();
    return s;
  }
  // No closing tag (yet): all reasoning, but for a start of one at the end.
  s.reasoning_end = finished ? text.size() : text.size() - partial_tag_at_end(text, kClose);
  s.reasoning_end = std::max(s.reasoning_end, begin);
  s.content_begin = text.size();
  s.content_settled = finished;
  return s;
}

}  // namespace exactly::server
