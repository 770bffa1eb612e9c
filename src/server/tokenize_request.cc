#include "server/tokenize_request.h"

#include <algorithm>

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "server/request_body.h"
#include "server/tool_calls.h"

namespace exactly::server {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw RequestError("field '" + field + "' " + why, field);
}

void only(const json& body, std::initializer_list<const char*> accepted) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& key = it.key();
    if (std::none_of(accepted.begin(), accepted.end(), [&](const char* a) { return key == a; }))
      bad(key.substr(0, 64), "is not supported by this server on this endpoint");
  }
}

bool flag(const json& body, const char* field, bool fallback) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) bad(field, "must be a boolean");
  return it->get<bool>();
}

json tokenize(const json& body, std::string_view text, const ServedModel& model) {
  std::vector<int32_t> ids;
  if (body.contains("messages")) {
    only(body, {"model", "messages", "add_generation_prompt", "add_special_tokens", "return_token_strs", "tools",
                "chat_template_kwargs"});
    // Tools in the client's member order, as the chat endpoint shows them to the model.
    std::optional<ToolRequest> tools;
    if (body.contains("tools")) tools = parse_tools(nlohmann::ordered_json::parse(text));
    // The chat template writes the special tokens itself, so none are added by default, as vLLM does.
    const bool add_special = flag(body, "add_special_tokens", false);
    const std::optional<nlohmann::ordered_json> kwargs = chat_template_kwargs(body);
    const std::string prompt = chat_prompt_text(body["messages"], model.tok, flag(body, "add_generation_prompt", true),
                                                tools ? &tools->tools : nullptr, kwargs ? &*kwargs : nullptr);
    ids = model.tok.encode(prompt, true);
    if (add_special && model.tok.add_bos() && model.tok.bos_id() && (ids.empty() || ids.front() != *model.tok.bos_id()))
      ids.insert(ids.begin(), *model.tok.bos_id());
  } else {
    only(body, {"model", "prompt", "add_special_tokens", "return_token_strs"});
    auto prompt = body.find("prompt");
    if (prompt == body.end() || !prompt->is_string()) bad("prompt", "must be a string (or send 'messages')");
    if (flag(body, "add_special_tokens", true) && model.tok.add_bos() && model.tok.bos_id())
      ids.push_back(*model.tok.bos_id());
    const std::vector<int32_t> text_ids = model.tok.encode(prompt->get<std::string>(), true);
    ids.insert(ids.end(), text_ids.begin(), text_ids.end());
  }
  json out = {{"count", ids.size()}, {"max_model_len", model.max_model_len}, {"tokens", ids}, {"token_strs", nullptr}};
  if (flag(body, "return_token_strs", false)) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(model.tok.token_text(id));
    out["token_strs"] = std::move(strs);
  }
  return out;
}

json detokenize(const json& body, std::string_view, const ServedModel& model) {
  only(body, {"model", "tokens"});
  auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array()) bad("tokens", "must be an array of token ids");
  std::vector<int32_t> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.tok.vocab_size())
      bad("tokens", "must hold token ids of this model (0 to " + std::to_string(model.tok.vocab_size() - 1) + ")");
    ids.push_back(t.get<int32_t>());
  }
  return {{"prompt", model.tok.decode(ids)}};
}

template <class F>
HttpReply answer(std::string_view text, const ServedModel& model, F f) {
  try {
    const json body = parse_api_body(text);
    if (auto m = body.find("model"); m != body.end() && !m->is_null() &&
        (!m->is_string() || std::find(model.names.begin(), model.names.end(), m->get<std::string>()) == model.names.end()))
      throw ApiError{404, "The model does not exist on this server.", "invalid_request_error", "model", "model_not_found"};
    return json_reply(200, f(body, text, model).dump(-1, ' ', false, json::error_handler_t::replace));
  } catch (const RequestError& e) {
    return error_reply(ApiError{400, e.what(), "invalid_request_error", e.param(), ""});
  } catch (const ApiError& e) {
    return error_reply(e);
  }
}

}  // namespace

HttpReply tokenize_reply(std::string_view body, const ServedModel& model) { return answer(body, model, tokenize); }
HttpReply detokenize_reply(std::string_view body, const ServedModel& model) { return answer(body, model, detokenize); }

}  // namespace exactly::server
