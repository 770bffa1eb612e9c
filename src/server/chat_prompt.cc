#include "server/chat_prompt.h"

#include "server/openai_request.h"

#if __has_include("tokenizer/chat_template.h")
#include "tokenizer/chat_template.h"
#define EXACTLY_HAVE_CHAT_TEMPLATE 1
#else
#define EXACTLY_HAVE_CHAT_TEMPLATE 0
#endif

namespace exactly::server {

using nlohmann::json;

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

json normalized_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) bad("must be a non-empty array of messages");
  json out = json::array();
  for (const json& m : messages) {
    if (!m.is_object()) bad("must contain objects");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) bad("has a message without a string 'role'");
    json copy = m;
    copy["content"] = content_text(m.contains("content") ? m["content"] : json());
    out.push_back(std::move(copy));
  }
  return out;
}

std::string render(const json& messages, const Tokenizer& tok, bool add_generation_prompt) {
  auto text_of = [&](std::optional<int32_t> id) { return id ? tok.token_bytes(*id, true) : std::string(); };
#if EXACTLY_HAVE_CHAT_TEMPLATE
  if (!tok.chat_template().empty()) {
    try {
      return render_chat_template(tok.chat_template(), messages, add_generation_prompt, text_of(tok.bos_id()),
                                  text_of(tok.eos_id()));
    } catch (const Error& e) {
      throw RequestError(std::string("the chat template failed on 'messages': ") + e.what(), "messages");
    }
  }
#endif
  (void)text_of;
  // ChatML, the format of models that ship no template (and the stand-in
  // until templates are rendered).
  std::string text;
  for (const json& m : messages)
    text += "<|im_start|>" + m["role"].get<std::string>() + "\n" + m["content"].get<std::string>() + "<|im_end|>\n";
  return add_generation_prompt ? text + "<|im_start|>assistant\n" : text;
}

}  // namespace

std::vector<int32_t> chat_prompt_tokens(const json& messages, const Tokenizer& tok) {
  std::vector<int32_t> ids = tok.encode(render(normalized_messages(messages), tok, true), true);
  if (tok.add_bos() && tok.bos_id() && (ids.empty() || ids.front() != *tok.bos_id()))
    ids.insert(ids.begin(), *tok.bos_id());
  return ids;
}

std::string chat_prompt_text(const json& messages, const Tokenizer& tok, bool add_generation_prompt) {
  return render(normalized_messages(messages), tok, add_generation_prompt);
}

}  // namespace exactly::server
