// The `_exactly` extension module: the engine, its outputs, request checking
// and the command line. The Python modules of the package (python/exactly/)
// give it vLLM's shape.
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "cli/cli_main.h"
#include "core/error.h"
#include "kvcache/capacity.h"
#include "server/openai_request.h"
#include "server/request_body.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"

namespace nb = nanobind;

namespace exactly::python {
namespace {

// Checks the sampling and stopping fields of a completions request body (a
// JSON object without its prompt) as `exactly batch` and the server read
// them; throws RequestError naming the field.
void check_request_fields(const std::string& body_text) {
  const nlohmann::json body = server::parse_request_body(body_text);
  server::parse_generation_fields(body, "");
  server::parse_max_tokens(body, "");
  server::parse_completion_logprobs(body, "");
  // A grammar's form is checked here; whether it compiles, when a request uses it.
  if (server::asks_for_structure(body)) server::parse_structured_output(nlohmann::ordered_json::parse(body_text));
}

const char* choice_name(server::ToolChoice c) {
  switch (c) {
    case server::ToolChoice::kNone: return "none";
    case server::ToolChoice::kAuto: return "auto";
    case server::ToolChoice::kRequired: return "required";
    case server::ToolChoice::kNamed: return "named";
  }
  return "auto";
}

// A chat request's "tools", "tool_choice" and "parallel_tool_calls" (a JSON
// object), checked as the server checks them (RequestError naming the
// field); returns {"choice", "names", "parallel", "forced_schema"} as JSON,
// forced_schema being the JSON schema a required or named call is generated
// in (null under auto and none), or "" when the object has no tools.
std::string tool_request(const std::string& body_text) {
  const auto body = nlohmann::ordered_json::parse(body_text);
  const std::optional<server::ToolRequest> t = server::parse_tools(body);
  if (!t) return "";
  nlohmann::ordered_json out{{"choice", choice_name(t->choice)}, {"names", t->names}, {"parallel", t->parallel},
                             {"forced_schema", nullptr}};
  if (t->choice == server::ToolChoice::kRequired || t->choice == server::ToolChoice::kNamed)
    out["forced_schema"] = nlohmann::ordered_json::parse(server::forced_call_grammar(*t).text);
  return out.dump();
}

// The calls in a finished answer, as the server finds them: {"content",
// "calls"} as JSON, calls in OpenAI's tool_calls shape.
std::string find_tool_calls(const std::string& text, const std::string& choice,
                            const std::vector<std::string>& names, bool parallel) {
  const server::ToolChoice c = choice == "none"       ? server::ToolChoice::kNone
                               : choice == "required" ? server::ToolChoice::kRequired
                               : choice == "named"    ? server::ToolChoice::kNamed
                                                      : server::ToolChoice::kAuto;
  const server::FoundCalls found = server::find_tool_calls(text, c, names, parallel);
  nlohmann::json out{{"content", nullptr}, {"calls", found.calls}};
  if (found.content) out["content"] = *found.content;
  return out.dump();
}

// The CLI with the GIL released, so that a server or a batch run in-process
// leaves other Python threads running.
int run_cli(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  nb::gil_scoped_release unlocked;
  return cli::run_cli(static_cast<int>(argv.size()), argv.data());
}

// A user's mistake (a bad argument, field, prompt or file) is a ValueError
// naming it; anything else the engine raises is a RuntimeError.
void translate_errors(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    const bool users = e.code() == ExitCode::kUsage || e.code() == ExitCode::kBadInput;
    PyErr_SetString(users ? PyExc_ValueError : PyExc_RuntimeError, e.what());
  }
}

}  // namespace
}  // namespace exactly::python

NB_MODULE(_exactly, m) {
  using namespace exactly::python;
  m.doc() = "The exactly engine, in-process; the exactly package wraps it in vLLM's shape.";
  nb::register_exception_translator(translate_errors);
  m.def("check_request_fields", &check_request_fields, nb::arg("body"),
        "Raises ValueError naming the first bad sampling or stopping field of a JSON request body.");
  m.def("parse_byte_size", [](const std::string& text) -> std::optional<int64_t> { return exactly::parse_byte_size(text); },
        nb::arg("text"), "\"2GiB\", \"512MiB\", \"4096\" → bytes, as --kv-cache-memory reads them; None when not a size.");
  m.def("tool_request", &tool_request, nb::arg("body"),
        "A chat request's tools, tool_choice and parallel_tool_calls checked as the server checks them.");
  m.def("find_tool_calls", &find_tool_calls, nb::arg("text"), nb::arg("choice"), nb::arg("names"),
        nb::arg("parallel"), "The tool calls in a finished answer, found as the server finds them.");
  m.def("main", &run_cli, nb::arg("argv"), "Runs the exactly command line; returns its exit code.");
  bind_outputs(m);
  bind_engine(m);
}
