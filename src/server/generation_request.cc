#include "server/generation_request.h"

#include <algorithm>
#include <optional>

#include "core/format.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "server/request_body.h"
#include "server/request_fields.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"

namespace exactly::server {

using nlohmann::json;

namespace {

[[noreturn]] void bad_field(const std::string& field, const std::string& why) {
  throw ApiError{400, strformat("field '%s' %s", field.c_str(), why.c_str()), "invalid_request_error", field, ""};
}

bool read_bool(const json& body, const char* field) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) bad_field(field, "must be a boolean");
  return it->get<bool>();
}

void check_model(const json& body, const std::vector<std::string>& names) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_string()) bad_field("model", "must be a string");
  const std::string name = it->get<std::string>();
  if (std::find(names.begin(), names.end(), name) == names.end())
    throw ApiError{404, strformat("The model '%s' does not exist; this server serves '%s'.", name.c_str(),
                                  names.front().c_str()),
                   "invalid_request_error", "model", "model_not_found"};
}

// The grammar a structured-output field asks for, compiled (or found in
// the cache) here, on a parse thread, so the engine's step never waits for it.
// A forced tool call is a structured output too: its grammar is the calls'.
std::shared_ptr<const Constraint> constraint_of(const nlohmann::ordered_json* ordered, const ServedModel& model,
                                                const RequestParams& p, const std::optional<ToolRequest>& tools) {
  std::optional<StructuredOutput> so = ordered ? parse_structured_output(*ordered) : std::nullopt;
  if (tools && (tools->choice == ToolChoice::kRequired || tools->choice == ToolChoice::kNamed)) {
    if (so) bad_field(so->field, "cannot be combined with a required tool call (tool_choice)");
    so = StructuredOutput{forced_call_grammar(*tools), "tool_choice"};
  }
  if (!so) return nullptr;
  if (p.ignore_eos) bad_field("ignore_eos", "cannot be combined with '" + so->field + "': a grammar ends at a stop token");
  if (model.grammars == nullptr) bad_field(so->field, "is not available here: this server has no grammar engine");
  try {
    return model.grammars->get(so->spec);
  } catch (const GrammarError& e) {
    throw ApiError{400, strformat("field '%s' does not compile: %s", so->field.c_str(), e.what()),
                   "invalid_request_error", so->field, ""};
  }
}

// Chat's prompt and logprob fields (completions read theirs in parse_prompts).
std::vector<int32_t> chat_fields(const json& body, const ServedModel& model, RequestParams& base,
                                 const std::optional<ToolRequest>& tools) {
  auto messages = body.find("messages");
  if (messages == body.end()) bad_field("messages", "is required");
  const std::optional<nlohmann::ordered_json> kwargs = chat_template_kwargs(body);
  std::vector<int32_t> prompt =
      chat_prompt_tokens(*messages, model.tok, tools ? &tools->tools : nullptr, kwargs ? &*kwargs : nullptr);
  if (read_bool(body, "logprobs")) base.logprobs = 0;
  if (auto top = body.find("top_logprobs"); top != body.end() && !top->is_null()) {
    if (!top->is_number_integer() || top->get<int64_t>() < 0 || top->get<int64_t>() > 20)
      bad_field("top_logprobs", "must be an integer between 0 and 20");
    if (base.logprobs < 0) bad_field("top_logprobs", "needs 'logprobs' set to true");
    base.logprobs = top->get<int32_t>();
  }
  return prompt;
}

// Chat, as vLLM: by default the answer may fill the rest of the context.
// Completions, as OpenAI: 16 tokens.
RequestParams with_prompt(const RequestParams& base, const std::vector<int32_t>& prompt,
                          std::optional<int64_t> max_tokens, Endpoint endpoint, int32_t max_model_len) {
  RequestParams r = base;
  r.prompt = prompt;
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  const int64_t room = int64_t{max_model_len} - prompt_len;
  r.max_tokens = max_tokens.value_or(endpoint == Endpoint::kChat ? std::max<int64_t>(room, 1) : 16);
  if (prompt_len + r.max_tokens > max_model_len)
    throw ApiError{400,
                   strformat("This model's maximum context length is %d tokens. However, you requested %lld tokens "
                             "(%zu in the prompt, %lld for the completion).",
                             max_model_len, static_cast<long long>(prompt_len + r.max_tokens), prompt.size(),
                             static_cast<long long>(r.max_tokens)),
                   "invalid_request_error", max_tokens ? "max_tokens" : (endpoint == Endpoint::kChat ? "messages" : "prompt"),
                   "context_length_exceeded"};
  return r;
}

GenerationRequest parse_fields(Endpoint endpoint, const json& body, std::string_view text, const ServedModel& model) {
  check_fields(endpoint, body);
  GenerationRequest out;
  RequestParams base = parse_generation_fields(body, "");
  std::optional<int64_t> max_tokens = parse_max_tokens(body, "");
  base.logit_bias = parse_logit_bias(body, model.vocab_size, "");
  // Schemas and tools are read again keeping their members' order (the
  // first read checked the limits): properties are generated, and tools
  // shown to the model, in the order the client wrote them.
  const bool ordered_needed = asks_for_structure(body) || body.contains("tools") || body.contains("tool_choice");
  const std::optional<nlohmann::ordered_json> ordered =
      ordered_needed ? std::optional(nlohmann::ordered_json::parse(text)) : std::nullopt;
  const std::optional<ToolRequest> tools = ordered && endpoint == Endpoint::kChat ? parse_tools(*ordered) : std::nullopt;
  base.constraint = constraint_of(ordered ? &*ordered : nullptr, model, base, tools);
  if (endpoint == Endpoint::kChat) out.shape.reasoning = model.reasoning;
  if (tools) {
    out.shape.tool_choice = tools->choice;
    out.shape.tool_names = tools->names;
    out.shape.parallel_tool_calls = tools->parallel;
  }
  std::vector<std::vector<int32_t>> prompts;
  if (endpoint == Endpoint::kCompletions) {
    prompts = parse_prompts(body, model.tok, model.vocab_size, true, "");
    base.logprobs = parse_completion_logprobs(body, "");
    if (read_bool(body, "echo")) {
      for (const auto& p : prompts) out.shape.echo.push_back(model.tok.decode(p));
      // OpenAI's legacy API scores an echoed prompt when logprobs are asked.
      out.shape.echo_logprobs = base.logprobs >= 0;
    }
  } else {
    prompts.push_back(chat_fields(body, model, base, tools));
  }
  out.shape.prompt_logprobs = base.prompt_logprobs >= 0;
  if (out.shape.echo_logprobs) base.prompt_logprobs = std::max(base.prompt_logprobs, base.logprobs);
  for (const auto& p : prompts) out.prompts.push_back(with_prompt(base, p, max_tokens, endpoint, model.max_model_len));
  out.shape.endpoint = endpoint;
  out.shape.model = model.names.front();
  out.shape.num_prompts = prompts.size();
  out.shape.n = base.n;
  out.shape.logprobs = base.logprobs >= 0;
  out.shape.return_token_ids = read_bool(body, "return_token_ids");
  out.shape.prompt_ids = prompts;
  out.stream = read_bool(body, "stream");
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object()) bad_field("stream_options", "must be an object");
    out.include_usage = read_bool(*so, "include_usage");
  }
  return out;
}

}  // namespace

GenerationRequest parse_generation_request(Endpoint endpoint, std::string_view text, const ServedModel& model) {
  const json body = parse_api_body(text);
  check_model(body, model.names);
  try {
    return parse_fields(endpoint, body, text, model);
  } catch (const RequestError& e) {
    throw ApiError{400, e.what(), "invalid_request_error", e.param(), ""};
  }
}

}  // namespace exactly::server
