#include "server/structured_output.h"

#include <algorithm>
#include <cctype>

#include "core/format.h"
#include "server/openai_request.h"

namespace exactly::server {

// Ordered: a schema's properties are generated in the order the client wrote them.
using json = nlohmann::ordered_json;

namespace {

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw RequestError("field '" + field + "' " + why, field.substr(0, field.find('.')));
}

// Nesting depth of a JSON value, without recursion (the value's depth is what is being bounded).
int depth_of(const json& root) {
  int deepest = 0;
  std::vector<std::pair<const json*, int>> stack{{&root, 1}};
  while (!stack.empty()) {
    auto [v, d] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, d);
    for (const json& child : *v) stack.push_back({&child, d + 1});
  }
  return deepest;
}

GrammarSpec schema_spec(const json& schema, const std::string& field) {
  json parsed = schema;
  if (schema.is_string()) {  // vLLM takes a schema as a JSON string too
    parsed = json::parse(schema.get<std::string>(), nullptr, false);
    if (parsed.is_discarded()) bad(field, "is a string that is not JSON");
  }
  if (!parsed.is_object() && !parsed.is_boolean()) bad(field, "must be a JSON schema (an object)");
  if (depth_of(parsed) > kMaxSchemaDepth)
    bad(field, strformat("nests deeper than %d levels", kMaxSchemaDepth));
  GrammarSpec spec{GrammarSpec::Kind::kJsonSchema, parsed.dump(), {}};
  if (spec.text.size() > kMaxSchemaBytes)
    bad(field, strformat("is a schema of %zu bytes; at most %zu are accepted", spec.text.size(), kMaxSchemaBytes));
  return spec;
}

// Bracket nesting of a regex or grammar, counted over every bracket (a
// quoted one too): a bound on the parsers' recursion, not a parse.
int bracket_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

// The largest count of a regex's {n}, {n,} or {n,m}.
int64_t largest_repeat(const std::string& text) {
  int64_t largest = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
      continue;
    }
    if (text[i] != '{') continue;
    int64_t value = 0;
    for (size_t j = i + 1; j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == ','); ++j) {
      value = text[j] == ',' ? 0 : std::min<int64_t>(value * 10 + (text[j] - '0'), INT64_C(1) << 40);
      largest = std::max(largest, value);
    }
  }
  return largest;
}

std::string text_of(const json& v, const std::string& field, size_t max_bytes) {
  if (!v.is_string()) bad(field, "must be a string");
  std::string s = v.get<std::string>();
  if (s.empty()) bad(field, "is empty");
  if (s.size() > max_bytes) bad(field, strformat("is %zu bytes long; at most %zu are accepted", s.size(), max_bytes));
  if (bracket_depth(s) > kMaxGroupDepth) bad(field, strformat("nests brackets deeper than %d", kMaxGroupDepth));
  return s;
}

GrammarSpec regex_spec(const json& v, const std::string& field) {
  std::string r = text_of(v, field, kMaxRegexBytes);
  if (largest_repeat(r) > kMaxRepeat)
    bad(field, strformat("repeats more than %lld times ({n,m} counts are at most %lld)",
                         static_cast<long long>(kMaxRepeat), static_cast<long long>(kMaxRepeat)));
  return {GrammarSpec::Kind::kRegex, std::move(r), {}};
}

GrammarSpec grammar_spec(const json& v, const std::string& field) {
  return {GrammarSpec::Kind::kEbnf, text_of(v, field, kMaxGrammarBytes), {}};
}

GrammarSpec choice_spec(const json& v, const std::string& field) {
  if (!v.is_array() || v.empty()) bad(field, "must be a non-empty array of strings");
  if (v.size() > kMaxChoices) bad(field, strformat("has %zu choices; at most %zu are accepted", v.size(), kMaxChoices));
  GrammarSpec spec{GrammarSpec::Kind::kChoice, "", {}};
  for (const json& c : v) {
    if (!c.is_string() || c.get<std::string>().empty()) bad(field, "must be a non-empty array of non-empty strings");
    if (c.get<std::string>().size() > kMaxChoiceBytes)
      bad(field, strformat("has a choice longer than %zu bytes", kMaxChoiceBytes));
    spec.choices.push_back(c.get<std::string>());
  }
  return spec;
}

void only_members(const json& obj, const std::string& field, std::initializer_list<const char*> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }))
      bad(field, "has a member '" + key.substr(0, 64) + "' that is not supported");
  }
}

// OpenAI's response_format: {"type": "text"}, {"type": "json_object"}, or
// {"type": "json_schema", "json_schema": {"name", "description", "schema", "strict"}}.
std::optional<GrammarSpec> response_format(const json& rf) {
  if (!rf.is_object()) bad("response_format", "must be an object with a 'type'");
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string()) bad("response_format", "needs a 'type': text, json_object or json_schema");
  if (*type == "text" || *type == "json_object") {
    only_members(rf, "response_format", {"type"});
    if (*type == "text") return std::nullopt;
    return GrammarSpec{GrammarSpec::Kind::kJsonObject, "", {}};
  }
  if (*type != "json_schema")
    bad("response_format", "has type '" + type->get<std::string>().substr(0, 64) +
                               "'; supported are text, json_object and json_schema");
  only_members(rf, "response_format", {"type", "json_schema"});
  auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object()) bad("response_format", "of type json_schema needs a 'json_schema' object");
  only_members(*js, "response_format.json_schema", {"name", "description", "schema", "strict"});
  auto name = js->find("name");
  if (name == js->end() || !name->is_string() || name->get<std::string>().empty())
    bad("response_format.json_schema", "needs a 'name' (a string)");
  if (auto strict = js->find("strict"); strict != js->end() && !strict->is_null() && !strict->is_boolean())
    bad("response_format.json_schema.strict", "must be a boolean");
  auto schema = js->find("schema");
  // No schema: any JSON value, as OpenAI reads a json_schema format without one.
  if (schema == js->end() || schema->is_null()) return GrammarSpec{GrammarSpec::Kind::kJsonObject, "", {}};
  return schema_spec(*schema, "response_format.json_schema.schema");
}

// vLLM's structured_outputs: exactly one of json, regex, choice, grammar, json_object.
GrammarSpec structured_outputs(const json& so) {
  if (!so.is_object()) bad("structured_outputs", "must be an object");
  only_members(so, "structured_outputs", {"json", "regex", "choice", "grammar", "json_object"});
  std::optional<GrammarSpec> spec;
  auto take = [&](GrammarSpec s) {
    if (spec) bad("structured_outputs", "must hold exactly one of json, regex, choice, grammar, json_object");
    spec = std::move(s);
  };
  for (const auto& [key, value] : so.items()) {
    if (value.is_null()) continue;
    const std::string field = "structured_outputs." + key;
    if (key == "json") take(schema_spec(value, field));
    else if (key == "regex") take(regex_spec(value, field));
    else if (key == "choice") take(choice_spec(value, field));
    else if (key == "grammar") take(grammar_spec(value, field));
    else if (key == "json_object") {
      if (!value.is_boolean()) bad(field, "must be a boolean");
      if (value.get<bool>()) take(GrammarSpec{GrammarSpec::Kind::kJsonObject, "", {}});
    }
  }
  if (!spec) bad("structured_outputs", "must hold one of json, regex, choice, grammar, json_object");
  return *spec;
}

}  // namespace

bool asks_for_structure(const nlohmann::json& body) {
  for (const char* f : {"response_format", "structured_outputs", "guided_json", "guided_regex", "guided_choice",
                        "guided_grammar"})
    if (body.contains(f)) return true;
  return false;
}

std::optional<StructuredOutput> parse_structured_output(const json& body) {
  std::optional<StructuredOutput> out;
  auto take = [&](const char* field, std::optional<GrammarSpec> spec) {
    if (!spec) return;
    if (out)
      bad(field, "asks for a grammar, and so does '" + out->field + "': a request may use only one");
    out = StructuredOutput{std::move(*spec), field};
  };
  auto field = [&](const char* name) -> const json* {
    auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  if (const json* v = field("response_format")) take("response_format", response_format(*v));
  if (const json* v = field("structured_outputs")) take("structured_outputs", structured_outputs(*v));
  if (const json* v = field("guided_json")) take("guided_json", schema_spec(*v, "guided_json"));
  if (const json* v = field("guided_regex")) take("guided_regex", regex_spec(*v, "guided_regex"));
  if (const json* v = field("guided_choice")) take("guided_choice", choice_spec(*v, "guided_choice"));
  if (const json* v = field("guided_grammar")) take("guided_grammar", grammar_spec(*v, "guided_grammar"));
  return out;
}

std::shared_ptr<const Constraint> parse_request_constraint(std::string_view text, const nlohmann::json& body,
                                                           bool ignore_eos, GrammarCache* grammars,
                                                           const std::string& where) {
  if (!asks_for_structure(body)) return nullptr;
  const std::string at = where.empty() ? "" : where + ": ";
  std::optional<StructuredOutput> so;
  try {
    so = parse_structured_output(json::parse(text));  // members in the order written
  } catch (const RequestError& e) {
    throw RequestError(at + e.what(), e.param());
  }
  if (!so) return nullptr;
  if (ignore_eos)
    throw RequestError(at + "field 'ignore_eos' cannot be combined with '" + so->field +
                           "': a grammar ends at a stop token",
                       "ignore_eos");
  if (grammars == nullptr)
    throw RequestError(at + "field '" + so->field + "' is not available: this build has no grammar engine", so->field);
  try {
    return grammars->get(so->spec);
  } catch (const GrammarError& e) {
    throw RequestError(at + "field '" + so->field + "' does not compile: " + e.what(), so->field);
  }
}

}  // namespace exactly::server
