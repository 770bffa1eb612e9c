// Chat templates: the Jinja programs shipped with models (GGUF key
// `tokenizer.chat_template`) that turn a list of messages into a prompt.
//
// Rendering matches Hugging Face's apply_chat_template, which runs jinja2's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
// loopcontrols extension, a `tojson` filter that is json.dumps(ensure_ascii=False),
// and the globals raise_exception(msg) and strftime_now(format).
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace exactly {

namespace jinja {
struct Stmt;
}

class ChatTemplate {
 public:
  struct Options {
    std::optional<std::tm> now;  // what strftime_now() formats; the current local time when absent
  };

  // Throws exactly::Error naming the line and column of a syntax error.
  static ChatTemplate parse(const std::string& template_text);

  // `variables` is the whole context: messages, add_generation_prompt,
  // bos_token, eos_token, tools, ... An ordered_json keeps the caller's key
  // order, which `tojson` reproduces (nlohmann::json sorts keys). Throws
  // exactly::Error naming the line and column of a failing expression, with
  // the message of raise_exception(msg) when the template raises.
  std::string render(const nlohmann::ordered_json& variables, const Options& options = {}) const;
  std::string render(const nlohmann::json& variables, const Options& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Stmt>>> body_;
};

// Renders a chat template with the variables chat templates expect:
// messages (list of {role, content, ...}), add_generation_prompt, bos_token,
// eos_token, plus any extra variables (tools, etc.) given in `extra`.
// Parsed templates are cached by text. Throws exactly::Error naming the
// line/column on a template error or when the template calls
// raise_exception(msg) (message included).
std::string render_chat_template(const std::string& template_text, const nlohmann::json& messages,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token, const nlohmann::json& extra = nlohmann::json::object());

// The same with key order preserved (tool schemas printed by `tojson` keep
// the order the client sent).
std::string render_chat_template(const std::string& template_text, const nlohmann::ordered_json& messages,
                                 bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token, const nlohmann::ordered_json& extra);

}  // namespace exactly
