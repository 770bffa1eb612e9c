// The request fields that constrain the output to a grammar: OpenAI's
// `response_format` (json_object, json_schema) and vLLM's extensions
// (`structured_outputs` with json / regex / grammar / choice / json_object,
// and the older `guided_json`, `guided_regex`, `guided_grammar`,
// `guided_choice`). At most one of them may ask for a grammar.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "constrain/grammar_cache.h"

namespace exactly::server {

// Bounds on what a client may ask to compile; beyond them the request is
// refused (400) before any compiling starts.
inline constexpr size_t kMaxSchemaBytes = 64 * 1024;  // the schema, serialized
inline constexpr int kMaxSchemaDepth = 32;            // nested arrays and objects in the schema
inline constexpr size_t kMaxRegexBytes = 4096;
inline constexpr size_t kMaxGrammarBytes = 64 * 1024;
inline constexpr int kMaxGroupDepth = 32;             // nested brackets in a regex or grammar
inline constexpr int64_t kMaxRepeat = 1000;           // a regex's {n,m}
inline constexpr size_t kMaxChoices = 256;
inline constexpr size_t kMaxChoiceBytes = 1024;

struct StructuredOutput {
  GrammarSpec spec;
  std::string field;  // the field that asked for it, named in errors
};

// The grammar the request asks for, or nullopt; throws RequestError naming
// the field when one is malformed, too large, or two ask at once. The body
// is read with its objects' members in order, as a schema's properties are
// generated in the order they are written.
std::optional<StructuredOutput> parse_structured_output(const nlohmann::ordered_json& body);

// Whether the body has any field parse_structured_output reads.
bool asks_for_structure(const nlohmann::json& body);

// The constraint a request body (`text`, parsed as `body`) asks for,
// compiled or found in `grammars`; nullptr when it asks for none. For the
// paths without HTTP (`exactly batch`, the Python package): throws
// RequestError naming `where` and the field, as their other fields do.
std::shared_ptr<const Constraint> parse_request_constraint(std::string_view text, const nlohmann::json& body,
                                                           bool ignore_eos, GrammarCache* grammars,
                                                           const std::string& where);

}  // namespace exactly::server
