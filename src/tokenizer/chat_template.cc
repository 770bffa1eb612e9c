#include "tokenizer/chat_template.h"

#include <map>
#include <mutex>

#include "core/error.h"
#include "tokenizer/jinja_eval.h"

namespace exactly {
namespace {

template <class Json>
jinja::ValueDict to_variables(const Json& variables) {
  if (!variables.is_object()) throw Error("chat template variables must be a JSON object");
  jinja::ValueDict dict;
  for (auto it = variables.begin(); it != variables.end(); ++it)
    dict.set(it.key(), jinja::Value::from_json(it.value()));
  return dict;
}

// Servers render the same template for every request; parse it once.
ChatTemplate cached_parse(const std::string& template_text) {
  static std::mutex mutex;
  static std::map<std::string, ChatTemplate> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(template_text);
  if (it != cache.end()) return it->second;
  ChatTemplate parsed = ChatTemplate::parse(template_text);
  if (cache.size() >= 16) cache.clear();  // a handful of models per process
  cache.emplace(template_text, parsed);
  return parsed;
}

template <class Json>
std::string render_with(const std::string& template_text, const Json& messages, bool add_generation_prompt,
                        const std::string& bos_token, const std::string& eos_token, const Json& extra) {
  Json variables = extra.is_object() ? extra : Json::object();
  variables["messages"] = messages;
  variables["add_generation_prompt"] = add_generation_prompt;
  variables["bos_token"] = bos_token;
  variables["eos_token"] = eos_token;
  return cached_parse(template_text).render(variables);
}

}  // namespace

ChatTemplate ChatTemplate::parse(const std::string& template_text) {
  ChatTemplate t;
  t.body_ = std::make_shared<const jinja::Body>(jinja::parse_template(template_text));
  return t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& variables, const Options& options) const {
  return jinja::render_template(*body_, to_variables(variables), jinja::RenderOptions{options.now});
}

std::string ChatTemplate::render(const nlohmann::json& variables, const Options& options) const {
  return jinja::render_template(*body_, to_variables(variables), jinja::RenderOptions{options.now});
}

std::string render_chat_template(const std::string& template_text, const nlohmann::json& messages,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token, const nlohmann::json& extra) {
  return render_with(template_text, messages, add_generation_prompt, bos_token, eos_token, extra);
}

std::string render_chat_template(const std::string& template_text, const nlohmann::ordered_json& messages,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token, const nlohmann::ordered_json& extra) {
  return render_with(template_text, messages, add_generation_prompt, bos_token, eos_token, extra);
}

}  // namespace exactly
