#include "server/tool_calls.h"

#include <algorithm>
#include <atomic>
#include <random>

#include "core/format.h"
#include "server/openai_request.h"

namespace exactly::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw RequestError("field '" + field + "' " + why, field);
}

constexpr size_t kMaxTools = 128;

std::string call_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return strformat("call_%08llx%08llx", static_cast<unsigned long long>(salt & 0xffffffffu),
                   static_cast<unsigned long long>(counter.fetch_add(1)));
}

json call_json(const std::string& name, const json& arguments) {
  return {{"id", call_id()},
          {"type", "function"},
          {"function", {{"name", name}, {"arguments", arguments.dump(-1, ' ', false, json::error_handler_t::replace)}}}};
}

// A call object in one of the accepted shapes; nullopt when it is not one.
std::optional<json> as_call(const json& v, const std::vector<std::string>& names) {
  if (!v.is_object()) return std::nullopt;
  auto name = v.find("name");
  if (name == v.end() || !name->is_string()) return std::nullopt;
  if (std::find(names.begin(), names.end(), name->get<std::string>()) == names.end()) return std::nullopt;
  auto args = v.find("arguments");
  if (args == v.end()) args = v.find("parameters");  // Llama 3.1's name
  json arguments = args == v.end() ? json::object() : *args;
  if (arguments.is_string()) arguments = json::parse(arguments.get<std::string>(), nullptr, false);
  if (!arguments.is_object()) return std::nullopt;
  return call_json(name->get<std::string>(), arguments);
}

// Calls in a JSON text holding one call or a list of them; false when it holds anything else.
bool add_calls(const std::string& text, const std::vector<std::string>& names, json& calls) {
  const json v = json::parse(text, nullptr, false);
  if (v.is_discarded()) return false;
  const json items = v.is_array() ? v : json::array({v});
  json found = json::array();
  for (const json& item : items) {
    std::optional<json> c = as_call(item, names);
    if (!c) return false;
    found.push_back(std::move(*c));
  }
  if (found.empty()) return false;
  for (json& c : found) calls.push_back(std::move(c));
  return true;
}

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

ordered_json call_schema(const ToolRequest& t, size_t i) {
  ordered_json params = ordered_json::parse(t.schemas[i]);
  return {{"type", "object"},
          {"properties", {{"name", {{"const", t.names[i]}}}, {"arguments", params}}},
          {"required", {"name", "arguments"}},
          {"additionalProperties", false}};
}

}  // namespace

std::optional<ToolRequest> parse_tools(const ordered_json& body) {
  auto tools = body.find("tools");
  auto choice = body.find("tool_choice");
  const bool has_tools = tools != body.end() && !tools->is_null();
  if (!has_tools) {
    if (choice != body.end() && !choice->is_null() && *choice != "none") bad("tool_choice", "needs 'tools'");
    return std::nullopt;
  }
  if (!tools->is_array() || tools->empty()) bad("tools", "must be a non-empty array of functions");
  if (tools->size() > kMaxTools) bad("tools", strformat("has more than %zu functions", kMaxTools));
  ToolRequest t;
  t.tools = *tools;
  for (const ordered_json& tool : *tools) {
    if (!tool.is_object() || tool.value("type", "") != "function" || !tool.contains("function") ||
        !tool["function"].is_object())
      bad("tools", "must hold {\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}}");
    for (const auto& [key, v] : tool.items())
      if (key != "type" && key != "function") bad("tools", "has a member '" + key.substr(0, 64) + "' that is not supported");
    const ordered_json& f = tool["function"];
    for (const auto& [key, v] : f.items())
      if (key != "name" && key != "description" && key != "parameters" && key != "strict")
        bad("tools", "has a function member '" + key.substr(0, 64) + "' that is not supported");
    auto name = f.find("name");
    if (name == f.end() || !name->is_string() || name->get<std::string>().empty() || name->get<std::string>().size() > 64)
      bad("tools", "has a function without a name (a string of 1 to 64 characters)");
    if (std::find(t.names.begin(), t.names.end(), name->get<std::string>()) != t.names.end())
      bad("tools", "names the function '" + name->get<std::string>() + "' twice");
    auto params = f.find("parameters");
    const ordered_json p = params == f.end() || params->is_null() ? ordered_json{{"type", "object"}} : *params;
    if (!p.is_object()) bad("tools", "has function parameters that are not a JSON schema (an object)");
    t.names.push_back(name->get<std::string>());
    t.schemas.push_back(p.dump());
  }
  if (choice != body.end() && !choice->is_null()) {
    if (*choice == "none") t.choice = ToolChoice::kNone;
    else if (*choice == "auto") t.choice = ToolChoice::kAuto;
    else if (*choice == "required") t.choice = ToolChoice::kRequired;
    else if (choice->is_object() && choice->value("type", "") == "function" && choice->contains("function") &&
             (*choice)["function"].is_object() && (*choice)["function"].contains("name") &&
             (*choice)["function"]["name"].is_string()) {
      t.choice = ToolChoice::kNamed;
      t.named = (*choice)["function"]["name"].get<std::string>();
      if (std::find(t.names.begin(), t.names.end(), t.named) == t.names.end())
        bad("tool_choice", "names '" + t.named.substr(0, 64) + "', which is not among the tools");
    } else {
      bad("tool_choice", "must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\"}}");
    }
  }
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) bad("parallel_tool_calls", "must be a boolean");
    t.parallel = p->get<bool>();
  }
  return t;
}

GrammarSpec forced_call_grammar(const ToolRequest& t) {
  ordered_json one;
  if (t.choice == ToolChoice::kNamed) {
    const size_t i = static_cast<size_t>(std::find(t.names.begin(), t.names.end(), t.named) - t.names.begin());
    one = call_schema(t, i);
  } else {
    ordered_json any = ordered_json::array();
    for (size_t i = 0; i < t.names.size(); ++i) any.push_back(call_schema(t, i));
    one = any.size() == 1 ? any[0] : ordered_json{{"anyOf", any}};
  }
  // One call: a list lets a small model repeat calls until max_tokens cuts the list.
  return {GrammarSpec::Kind::kJsonSchema, one.dump(), {}};
}

FoundCalls find_tool_calls(const std::string& text, ToolChoice choice, const std::vector<std::string>& names,
                           bool parallel) {
  FoundCalls out;
  if (choice == ToolChoice::kNone) {
    out.content = text;
    return out;
  }
  if (choice == ToolChoice::kRequired || choice == ToolChoice::kNamed) {
    if (!add_calls(text, names, out.calls)) out.content = text;
    return out;
  }
  // <tool_call> blocks anywhere; the text around them is content.
  static const std::string kOpen = "<tool_call>", kClose = "</tool_call>";
  std::string rest;
  size_t at = 0;
  bool any_block = false;
  while (true) {
    const size_t open = text.find(kOpen, at);
    if (open == std::string::npos) break;
    const size_t close = text.find(kClose, open + kOpen.size());
    const size_t end = close == std::string::npos ? text.size() : close;
    const std::string inner = text.substr(open + kOpen.size(), end - open - kOpen.size());
    if (!add_calls(trimmed(inner), names, out.calls)) break;
    any_block = true;
    rest += text.substr(at, open - at);
    at = close == std::string::npos ? text.size() : close + kClose.size();
  }
  if (any_block) {
    rest += text.substr(at);
  } else if (!add_calls(trimmed(text), names, out.calls)) {  // the whole answer is a call (Llama 3.1)
    out.content = text;
    return out;
  }
  if (!parallel && out.calls.size() > 1) out.calls.erase(out.calls.begin() + 1, out.calls.end());
  if (!trimmed(rest).empty()) out.content = trimmed(rest);
  return out;
}

size_t streamable_content(const std::string& text, size_t sent) {
  static const std::string kOpen = "<tool_call>";
  if (text.empty() || std::string(" \t\r\n").find(text[0]) != std::string::npos || text[0] == '{' || text[0] == '[')
    return 0;
  size_t end = std::min(text.find(kOpen, sent), text.size());
  // A trailing start of the marker may still become one.
  for (size_t n = std::min(kOpen.size() - 1, end); n > 0; --n)
    if (text.compare(end - n, n, kOpen, 0, n) == 0) {
      end -= n;
      break;
    }
  while (end > 0 && std::string(" \t\r\n").find(text[end - 1]) != std::string::npos) --end;
  return end;
}

std::string tools_system_text(const ordered_json& tools) {
  std::string text =
      "You may call functions. These are the functions you can call, as JSON schemas:\n<tools>\n";
  for (const ordered_json& t : tools) text += t.dump() + "\n";
  text += "</tools>\nTo call functions, answer with one or more blocks of the form\n"
          "<tool_call>\n{\"name\": <function name>, \"arguments\": <arguments as a JSON object>}\n</tool_call>\n"
          "and nothing else; otherwise answer in plain text.";
  return text;
}

}  // namespace exactly::server
