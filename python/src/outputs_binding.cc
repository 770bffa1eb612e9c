// What Engine.step() returns, read-only: per request, per completion, the
// tokens, text and logprobs gained in the step. The package's outputs.py turns
// them into vLLM's RequestOutput and CompletionOutput.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "engine/request_params.h"

namespace nb = nanobind;

namespace exactly::python {

void bind_outputs(nb::module_& m) {
  nb::class_<TokenLogprobs>(m, "TokenLogprobs")
      .def_ro("id", &TokenLogprobs::id)
      .def_ro("logprob", &TokenLogprobs::logprob)
      .def_ro("top", &TokenLogprobs::top, "[(token id, logprob)] the top alternatives, most likely first")
      .def_ro("rank", &TokenLogprobs::rank);

  nb::class_<CompletionDelta>(m, "CompletionDelta")
      .def_ro("index", &CompletionDelta::index)
      .def_ro("token_ids", &CompletionDelta::token_ids)
      // Bytes: the package decodes them as the CLI writes them (invalid UTF-8 replaced).
      .def_prop_ro("text", [](const CompletionDelta& d) { return nb::bytes(d.text.data(), d.text.size()); })
      .def_ro("logprobs", &CompletionDelta::logprobs)
      .def_prop_ro("finish_reason", [](const CompletionDelta& d) -> std::optional<std::string> {
        if (!d.finish_reason) return std::nullopt;
        return std::string(to_string(*d.finish_reason));
      });

  nb::class_<RequestOutput>(m, "StepOutput")
      .def_ro("id", &RequestOutput::id)
      .def_ro("completions", &RequestOutput::completions)
      .def_ro("prompt_logprobs", &RequestOutput::prompt_logprobs)
      .def_ro("finished", &RequestOutput::finished)
      .def_ro("prompt_tokens", &RequestOutput::prompt_tokens)
      .def_ro("cached_prompt_tokens", &RequestOutput::cached_prompt_tokens)
      .def_ro("completion_tokens", &RequestOutput::completion_tokens);
}

}  // namespace exactly::python
