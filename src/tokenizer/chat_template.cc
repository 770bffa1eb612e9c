#include "tokenizer/chat_template.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/format.h"
#include "tokenizer/jinja_eval.h"

namespace exactly {
namespace {

// Whether `j` nests at most `limit` arrays and objects deep, walked with an
// explicit stack: copies and conversions of JSON recurse once per level, so
// the depth is checked before anything copies it.
template <class Json>
bool nests_within(const Json& j, int limit) {
  std::vector<std::pair<const Json*, int>> stack{{&j, 0}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (!node->is_structured()) continue;
    if (depth >= limit) return false;
    for (const auto& child : *node) stack.emplace_back(&child, depth + 1);
  }
  return true;
}

template <class Json>
void check_depth(const Json& j, const char* what) {
  if (!nests_within(j, jinja::Value::kMaxJsonDepth))
    throw Error(strformat("chat template %s nest more than %d deep", what, jinja::Value::kMaxJsonDepth),
                ExitCode::kBadInput);
}

template <class Json>
jinja::ValueDict to_variables(const Json& variables) {
  if (!variables.is_object()) throw Error("chat template variables must be a JSON object");
  jinja::ValueDict dict;
  try {
    for (auto it = variables.begin(); it != variables.end(); ++it)
      dict.set(it.key(), jinja::Value::from_json(it.value()));
  } catch (const jinja::EvalError& e) {
    throw Error(std::string("chat template variables: ") + e.what(), ExitCode::kBadInput);
  }
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
  check_depth(messages, "messages");
  check_depth(extra, "variables");
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
