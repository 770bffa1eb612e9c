// libFuzzer target for the request path of `exactly serve`: a body through
// parse_generation_request — JSON under its limits, the OpenAI fields, the
// model's chat template, tokenization — exactly as a server worker runs it.
// Any input must either give prompts of valid token ids within the context,
// or be refused with a 4xx ApiError. A crash, a sanitizer report, another
// exception or a 5xx is a finding.
//
// Input: the first byte picks the endpoint (odd: chat, even: completions; the
// seeds start with 'c' or 'p'), the rest is the body. The tokenizer and chat
// template are the model's named by EXACTLY_FUZZ_MODEL.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "core/error.h"
#include "loader/gguf.h"
#include "server/api_error.h"
#include "server/generation_request.h"

namespace {

using exactly::server::ApiError;
using exactly::server::Endpoint;

std::unique_ptr<exactly::Tokenizer> g_tokenizer;
std::unique_ptr<exactly::server::ServedModel> g_model;

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "request_fuzz: %s\n", what);
  std::abort();
}

void check(const exactly::server::GenerationRequest& r) {
  if (r.prompts.empty()) finding("a request without prompts");
  for (const auto& p : r.prompts) {
    if (p.prompt.empty()) finding("an empty prompt");
    for (int32_t id : p.prompt)
      if (id < 0 || id >= g_model->vocab_size) finding("a token id outside the vocabulary");
    if (p.max_tokens < 1 || static_cast<int64_t>(p.prompt.size()) + p.max_tokens > g_model->max_model_len)
      finding("a request past the context");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* path = std::getenv("EXACTLY_FUZZ_MODEL");
  if (!path) finding("EXACTLY_FUZZ_MODEL must name a GGUF model (its tokenizer and chat template are used)");
  auto file = exactly::GGUFFile::open(path);
  g_tokenizer = exactly::Tokenizer::from_gguf(*file);
  g_model.reset(new exactly::server::ServedModel{*g_tokenizer, g_tokenizer->vocab_size(), 8192, {"fuzz-model"}});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Endpoint endpoint = (data[0] & 1) ? Endpoint::kChat : Endpoint::kCompletions;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    check(exactly::server::parse_generation_request(endpoint, body, *g_model));
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) finding("a refusal that is not a 4xx");
  }
  return 0;
}
