#include "server/openai_response.h"

#include <atomic>
#include <chrono>
#include <random>

#include "core/format.h"
#include "server/openai_request.h"

namespace exactly::server {

using nlohmann::json;

namespace {

std::string new_id(Endpoint e) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return strformat("%s-%016llx%08llx", e == Endpoint::kChat ? "chatcmpl" : "cmpl",
                   static_cast<unsigned long long>(salt), static_cast<unsigned long long>(counter.fetch_add(1)));
}

json byte_list(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(c);
  return out;
}

json chat_token(const Tokenizer& tok, int32_t id, double logprob) {
  std::string text = tok.token_bytes(id, true);
  return {{"token", text}, {"logprob", logprob}, {"bytes", byte_list(text)}};
}

}  // namespace

OpenAIResponse::OpenAIResponse(ResponseShape shape, const Tokenizer& tok)
    : shape_(std::move(shape)),
      tok_(tok),
      id_(new_id(shape_.endpoint)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      choices_(shape_.num_prompts * static_cast<size_t>(shape_.n)),
      prompts_(shape_.num_prompts) {}

json OpenAIResponse::logprobs_json(const std::vector<TokenLogprobs>& lps, size_t text_offset) const {
  if (shape_.endpoint == Endpoint::kCompletions) return completion_logprobs_json(lps, tok_, text_offset);
  json content = json::array();
  for (const TokenLogprobs& t : lps) {
    json entry = chat_token(tok_, t.id, t.logprob);
    json top = json::array();
    for (const auto& [id, l] : t.top) top.push_back(chat_token(tok_, id, l));
    entry["top_logprobs"] = top;
    content.push_back(entry);
  }
  return {{"content", content}};
}

json OpenAIResponse::chunk(json choices) const {
  const bool chat = shape_.endpoint == Endpoint::kChat;
  return {{"id", id_}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
          {"model", shape_.model}, {"choices", std::move(choices)}};
}

namespace {

// The logprobs object of a completions choice whose prompt is echoed: the
// prompt's tokens (no logprob for the first), then the completion's.
json echoed_logprobs(const std::vector<int32_t>& prompt, const std::vector<std::optional<TokenLogprobs>>& scores,
                     const json& completion, const Tokenizer& tok) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  size_t offset = 0;
  for (size_t i = 0; i < prompt.size(); ++i) {
    std::string text = tok.token_bytes(prompt[i], true);
    offsets.push_back(offset);
    offset += text.size();
    tokens.push_back(std::move(text));
    const std::optional<TokenLogprobs>& t = i < scores.size() ? scores[i] : std::nullopt;
    token_logprobs.push_back(t ? json(t->logprob) : json(nullptr));
    json alts = t ? json::object() : json(nullptr);
    if (t)
      for (const auto& [id, l] : t->top) alts[tok.token_bytes(id, true)] = l;
    top.push_back(std::move(alts));
  }
  if (completion.is_object()) {
    auto append = [&](json& dst, const char* key) {
      for (const json& v : completion.at(key)) dst.push_back(v);
    };
    append(tokens, "tokens");
    append(token_logprobs, "token_logprobs");
    append(top, "top_logprobs");
    append(offsets, "text_offset");
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

}  // namespace

void OpenAIResponse::add_prompt_fields(json& choice, size_t prompt) const {
  if (shape_.prompt_logprobs) choice["prompt_logprobs"] = prompt_logprobs_json(prompts_[prompt].prompt_logprobs, tok_);
  if (shape_.return_token_ids && prompt < shape_.prompt_ids.size())
    choice["prompt_token_ids"] = shape_.prompt_ids[prompt];
}

std::vector<json> OpenAIResponse::prompt_chunks(size_t prompt) const {
  std::vector<json> out;
  const std::string echo = shape_.echo.empty() ? std::string() : shape_.echo[prompt];
  for (int32_t j = 0; j < shape_.n; ++j) {
    const size_t i = prompt * static_cast<size_t>(shape_.n) + static_cast<size_t>(j);
    json choice = {{"index", i}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (shape_.endpoint == Endpoint::kChat) {
      choice["delta"] = {{"role", "assistant"}, {"content", ""}};
    } else {
      if (echo.empty() && !shape_.prompt_logprobs && !shape_.return_token_ids) continue;
      choice["text"] = echo;
      if (shape_.echo_logprobs)
        choice["logprobs"] =
            echoed_logprobs(shape_.prompt_ids[prompt], prompts_[prompt].prompt_logprobs, nullptr, tok_);
    }
    add_prompt_fields(choice, prompt);
    out.push_back(chunk(json::array({std::move(choice)})));
  }
  return out;
}

std::vector<json> OpenAIResponse::opening_chunks() const {
  std::vector<json> out;
  if (prompt_waits_for_scores()) return out;  // sent with the prompt's logprobs (absorb)
  for (size_t prompt = 0; prompt < shape_.num_prompts; ++prompt)
    for (json& c : prompt_chunks(prompt)) out.push_back(std::move(c));
  return out;
}

// A chat answer whose text is parsed (tool calls, reasoning): the reasoning
// and the text that is certainly content go out as they come (each delta
// begins where the last ended, by split_reasoning's and streamable_content's
// construction); the rest, the calls and the logprobs when the answer ends.
void OpenAIResponse::parsed_chat_chunks(Choice& c, size_t index, bool finished, std::vector<json>& chunks) {
  auto delta = [&](json d) {
    chunks.push_back(chunk(json::array({{{"index", index}, {"logprobs", nullptr}, {"finish_reason", nullptr},
                                         {"delta", std::move(d)}}})));
  };
  // Each delta scans only the text after what was sent: a long answer costs linear, not quadratic, time.
  const ReasoningSplit r = split_reasoning(c.text, shape_.reasoning, finished, c.streamed_reasoning);
  if (r.has_reasoning && r.reasoning_end - r.reasoning_begin > c.streamed_reasoning) {
    const size_t ready = r.reasoning_end - r.reasoning_begin;
    delta({{"reasoning_content", c.text.substr(r.reasoning_begin + c.streamed_reasoning, ready - c.streamed_reasoning)}});
    c.streamed_reasoning = ready;
  }
  const std::string content = r.content_settled ? c.text.substr(std::min(r.content_begin, c.text.size())) : "";
  if (!finished) {
    const size_t ready = shape_.tool_choice == ToolChoice::kNone   ? content.size()
                         : shape_.tool_choice == ToolChoice::kAuto ? streamable_content(content, c.streamed)
                                                                   : 0;
    if (ready > c.streamed) delta({{"content", content.substr(c.streamed, ready - c.streamed)}});
    c.streamed = std::max(c.streamed, ready);
    return;
  }
  json choice = {{"index", index}, {"logprobs", shape_.logprobs ? logprobs_json(c.logprobs, 0) : json(nullptr)},
                 {"finish_reason", nullptr}};
  const FoundCalls found = shape_.tool_choice == ToolChoice::kNone
                               ? FoundCalls{content.empty() && r.has_reasoning ? std::nullopt
                                                                               : std::optional(content),
                                            json::array()}
                               : find_tool_calls(content, shape_.tool_choice, shape_.tool_names,
                                                 shape_.parallel_tool_calls);
  const bool more = found.content && found.content->size() > c.streamed;
  choice["delta"] = more ? json{{"content", found.content->substr(c.streamed)}} : json::object();
  if (!found.calls.empty()) {
    json calls = found.calls;
    for (size_t k = 0; k < calls.size(); ++k) calls[k]["index"] = k;
    choice["delta"]["tool_calls"] = calls;
    if (c.finish_reason == "stop") c.finish_reason = "tool_calls";
  }
  if (shape_.return_token_ids) choice["token_ids"] = c.token_ids;
  chunks.push_back(chunk(json::array({choice})));
  json last = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", c.finish_reason}, {"delta", json::object()}};
  chunks.push_back(chunk(json::array({last})));
}

std::vector<json> OpenAIResponse::absorb(const ChannelEvent& event) {
  std::vector<json> chunks;
  if (event.kind != ChannelEvent::Kind::kOutput) return chunks;
  const RequestOutput& out = event.output;
  PromptState& p = prompts_.at(event.prompt_index);
  p.prompt_tokens = std::max(p.prompt_tokens, out.prompt_tokens);
  p.cached_tokens = std::max(p.cached_tokens, out.cached_prompt_tokens);
  p.completion_tokens = std::max(p.completion_tokens, out.completion_tokens);
  if (!out.prompt_logprobs.empty()) {
    p.prompt_logprobs = out.prompt_logprobs;
    if (prompt_waits_for_scores())
      for (json& c : prompt_chunks(event.prompt_index)) chunks.push_back(std::move(c));
  }
  for (const CompletionDelta& d : out.completions) {
    if (d.index < 0 || d.index >= shape_.n) continue;
    const size_t index = event.prompt_index * static_cast<size_t>(shape_.n) + static_cast<size_t>(d.index);
    Choice& c = choices_[index];
    const size_t offset = c.text.size();
    c.text += d.text;
    c.token_ids.insert(c.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
    c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (d.finish_reason) c.finish_reason = to_string(*d.finish_reason);
    if (shape_.endpoint == Endpoint::kChat && (shape_.tool_choice != ToolChoice::kNone ||
                                              shape_.reasoning != ReasoningParser::kNone)) {
      parsed_chat_chunks(c, index, d.finish_reason.has_value(), chunks);
      continue;
    }
    if (d.text.empty() && d.logprobs.empty() && !d.finish_reason) continue;
    json lp = shape_.logprobs ? logprobs_json(d.logprobs, offset) : json(nullptr);
    json finish = d.finish_reason ? json(c.finish_reason) : json(nullptr);
    json choice = {{"index", index}, {"logprobs", lp}, {"finish_reason", finish}};
    if (shape_.endpoint == Endpoint::kChat)
      choice["delta"] = d.text.empty() ? json::object() : json{{"content", d.text}};
    else
      choice["text"] = d.text;
    if (shape_.return_token_ids) choice["token_ids"] = d.token_ids;
    chunks.push_back(chunk(json::array({choice})));
  }
  if (out.finished) {
    p.finished = true;
    // A completion the engine ended without a reason (shutdown) was aborted.
    for (int32_t j = 0; j < shape_.n; ++j) {
      const size_t index = event.prompt_index * static_cast<size_t>(shape_.n) + static_cast<size_t>(j);
      Choice& c = choices_[index];
      if (!c.finish_reason.empty()) continue;
      c.finish_reason = "abort";
      json choice = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", "abort"}};
      if (shape_.endpoint == Endpoint::kChat) choice["delta"] = json::object();
      else choice["text"] = "";
      chunks.push_back(chunk(json::array({choice})));
    }
  }
  return chunks;
}

bool OpenAIResponse::finished() const {
  for (const PromptState& p : prompts_)
    if (!p.finished) return false;
  return true;
}

void OpenAIResponse::abort_unfinished() {
  for (Choice& c : choices_)
    if (c.finish_reason.empty()) c.finish_reason = "abort";
}

json OpenAIResponse::usage() const {
  int64_t prompt = 0, cached = 0, completion = 0;
  for (const PromptState& p : prompts_) {
    prompt += p.prompt_tokens;
    cached += p.cached_tokens;
    completion += p.completion_tokens;
  }
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

json OpenAIResponse::usage_chunk() const {
  json c = chunk(json::array());
  c["usage"] = usage();
  return c;
}

json OpenAIResponse::whole() const {
  const bool chat = shape_.endpoint == Endpoint::kChat;
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    const size_t prompt = i / static_cast<size_t>(shape_.n);
    json choice = {{"index", i}, {"finish_reason", c.finish_reason}};
    if (chat) {
      const ReasoningSplit r = split_reasoning(c.text, shape_.reasoning, true);
      const std::string content = c.text.substr(std::min(r.content_begin, c.text.size()));
      choice["message"] = {{"role", "assistant"}};
      if (r.has_reasoning)
        choice["message"]["reasoning_content"] = c.text.substr(r.reasoning_begin, r.reasoning_end - r.reasoning_begin);
      if (shape_.tool_choice != ToolChoice::kNone) {
        const FoundCalls found = find_tool_calls(content, shape_.tool_choice, shape_.tool_names, shape_.parallel_tool_calls);
        choice["message"]["content"] = found.content ? json(*found.content) : json(nullptr);
        if (!found.calls.empty()) {
          choice["message"]["tool_calls"] = found.calls;
          if (c.finish_reason == "stop") choice["finish_reason"] = "tool_calls";
        }
      } else {
        choice["message"]["content"] = content.empty() && r.has_reasoning ? json(nullptr) : json(content);
      }
      choice["logprobs"] = shape_.logprobs ? logprobs_json(c.logprobs, 0) : json(nullptr);
    } else {
      const std::string echo = shape_.echo.empty() ? std::string() : shape_.echo[prompt];
      choice["text"] = echo + c.text;
      choice["logprobs"] = shape_.logprobs ? logprobs_json(c.logprobs, echo.size()) : json(nullptr);
      if (shape_.echo_logprobs)
        choice["logprobs"] =
            echoed_logprobs(shape_.prompt_ids[prompt], prompts_[prompt].prompt_logprobs, choice["logprobs"], tok_);
    }
    add_prompt_fields(choice, prompt);
    if (shape_.return_token_ids) choice["token_ids"] = c.token_ids;
    choices.push_back(std::move(choice));
  }
  return {{"id", id_}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", created_},
          {"model", shape_.model}, {"choices", choices}, {"usage", usage()}};
}

}  // namespace exactly::server
