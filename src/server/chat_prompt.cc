#include "server/chat_prompt.h"

#include "core/format.h"
#include "server/openai_request.h"
#include "server/request_body.h"
#include "server/tool_calls.h"

#if __has_include("tokenizer/chat_template.h")
#include "tokenizer/chat_template.h"
#define EXACTLY_HAVE_CHAT_TEMPLATE 1
#else
#define EXACTLY_HAVE_CHAT_TEMPLATE 0
#endif

namespace exactly::server {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

namespace {

[[noreturn]] void bad(const std::string& why) { throw RequestError("field 'messages' " + why, "messages"); }

// OpenAI lets content be a list of typed parts; only text parts mean anything
// to a text model, so they are joined and other parts refused.
std::string content_text(const json& content) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad("has a content that is not a string or an array of parts");
  std::string text;
  for (const json& part : content) {
    auto type = part.is_object() ? part.find("type") : part.end();
    auto text_field = part.is_object() ? part.find("text") : part.end();
    if (!part.is_object() || type == part.end() || *type != "text" || text_field == part.end() ||
        !text_field->is_string())
      bad("has a content part that is not {\"type\": \"text\", \"text\": string}");
    text += text_field->get<std::string>();
  }
  return text;
}

// An assistant message's tool_calls, checked, with each call's arguments as
// a JSON object in the client's key order: OpenAI sends them as a string,
// and chat templates print them with `tojson` (vLLM and transformers pass
// them the same way).
ordered parsed_tool_calls(const json& calls) {
  if (!calls.is_array()) bad("has 'tool_calls' that is not an array");
  ordered out = ordered::array();
  for (const json& c : calls) {
    const json* f = c.is_object() && c.contains("function") && c["function"].is_object() ? &c["function"] : nullptr;
    if (f == nullptr || !f->contains("name") || !(*f)["name"].is_string())
      bad("has a tool call without {\"function\": {\"name\", \"arguments\"}}");
    ordered call = ordered(c);
    ordered args = f->contains("arguments") ? ordered((*f)["arguments"]) : ordered::object();
    if (args.is_string()) {
      // As deep as a request body may nest: deeper values would recurse
      // through every copy and dump below.
      bool too_deep = false;
      const auto limit = [&](int depth, ordered::parse_event_t, ordered&) {
        too_deep = too_deep || depth > kMaxJsonDepth;
        return !too_deep;
      };
      args = ordered::parse(args.get<std::string>(), limit, false);
      if (too_deep) bad(strformat("has tool call arguments that nest more than %d deep", kMaxJsonDepth));
    }
    if (args.is_discarded()) bad("has a tool call whose arguments are not JSON");
    call["function"]["arguments"] = std::move(args);
    out.push_back(std::move(call));
  }
  return out;
}

// Tool calls as the <tool_call> blocks the model is asked to write.
std::string calls_text(const ordered& calls) {
  std::string text;
  for (const ordered& c : calls) {
    const ordered call{{"name", c["function"]["name"]}, {"arguments", c["function"]["arguments"]}};
    text += "<tool_call>\n" + call.dump() + "\n</tool_call>";
  }
  return text;
}

ordered normalized_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) bad("must be a non-empty array of messages");
  ordered out = ordered::array();
  for (const json& m : messages) {
    if (!m.is_object()) bad("must contain objects");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) bad("has a message without a string 'role'");
    ordered copy = ordered(m);
    copy["content"] = content_text(m.contains("content") ? m["content"] : json());
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) copy["tool_calls"] = parsed_tool_calls(m["tool_calls"]);
    out.push_back(std::move(copy));
  }
  return out;
}

// What a template that renders no tools needs: tool calls in the content,
// the tools in the system message.
ordered with_tools_in_text(ordered messages, const std::string& tmpl, const nlohmann::ordered_json* tools) {
  if (tmpl.find("tool_calls") == std::string::npos)
    for (ordered& m : messages)
      if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
        m["content"] = m["content"].get<std::string>() + calls_text(m["tool_calls"]);
        m.erase("tool_calls");
      }
  if (tools != nullptr && tmpl.find("tools") == std::string::npos) {
    const std::string text = tools_system_text(*tools);
    if (messages[0]["role"] == "system")
      messages[0]["content"] = messages[0]["content"].get<std::string>() + "\n\n" + text;
    else
      messages.insert(messages.begin(), ordered{{"role", "system"}, {"content", text}});
  }
  return messages;
}

std::string render(const ordered& raw_messages, const Tokenizer& tok, bool add_generation_prompt,
                   const nlohmann::ordered_json* tools, const nlohmann::ordered_json* template_kwargs) {
  auto text_of = [&](std::optional<int32_t> id) { return id ? tok.token_bytes(*id, true) : std::string(); };
  const ordered messages = with_tools_in_text(raw_messages, tok.chat_template(), tools);
#if EXACTLY_HAVE_CHAT_TEMPLATE
  if (!tok.chat_template().empty()) {
    ordered extra = template_kwargs != nullptr ? *template_kwargs : ordered::object();
    if (tools != nullptr && tok.chat_template().find("tools") != std::string::npos) extra["tools"] = *tools;
    try {
      return render_chat_template(tok.chat_template(), messages, add_generation_prompt, text_of(tok.bos_id()),
                                  text_of(tok.eos_id()), extra);
    } catch (const Error& e) {
      throw RequestError(std::string("the chat template failed on 'messages': ") + e.what(), "messages");
    }
  }
#endif
  (void)text_of;
  if (template_kwargs != nullptr && !template_kwargs->empty())
    throw RequestError("field 'chat_template_kwargs' has variables for a chat template, and this model has none",
                       "chat_template_kwargs");
  // ChatML, the format of models that ship no template (and the stand-in
  // until templates are rendered).
  std::string text;
  for (const ordered& m : messages)
    text += "<|im_start|>" + m["role"].get<std::string>() + "\n" + m["content"].get<std::string>() + "<|im_end|>\n";
  return add_generation_prompt ? text + "<|im_start|>assistant\n" : text;
}

}  // namespace

std::vector<int32_t> chat_prompt_tokens(const json& messages, const Tokenizer& tok, const nlohmann::ordered_json* tools,
                                        const nlohmann::ordered_json* template_kwargs) {
  std::vector<int32_t> ids = tok.encode(render(normalized_messages(messages), tok, true, tools, template_kwargs), true);
  if (tok.add_bos() && tok.bos_id() && (ids.empty() || ids.front() != *tok.bos_id()))
    ids.insert(ids.begin(), *tok.bos_id());
  return ids;
}

std::string chat_prompt_text(const json& messages, const Tokenizer& tok, bool add_generation_prompt,
                             const nlohmann::ordered_json* tools, const nlohmann::ordered_json* template_kwargs) {
  return render(normalized_messages(messages), tok, add_generation_prompt, tools, template_kwargs);
}

std::optional<nlohmann::ordered_json> chat_template_kwargs(const json& body) {
  auto it = body.find("chat_template_kwargs");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object())
    throw RequestError("field 'chat_template_kwargs' must be an object of template variables", "chat_template_kwargs");
  for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})
    if (it->contains(reserved))
      throw RequestError(std::string("field 'chat_template_kwargs' may not set '") + reserved +
                             "', which the server sets from the request",
                         "chat_template_kwargs");
  return ordered(*it);
}

}  // namespace exactly::server
