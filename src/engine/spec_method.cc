#include "engine/spec_method.h"

#include <charconv>

#include "core/error.h"
#include "core/format.h"

namespace exactly {

namespace {

constexpr const char* kKnown = "ngram, draft:PATH, layerskip:L, head:PATH";

bool starts_with(const std::string& s, const char* prefix, std::string& rest) {
  const std::string p(prefix);
  if (s.compare(0, p.size(), p) != 0) return false;
  rest = s.substr(p.size());
  return true;
}

}  // namespace

SpecMethod parse_spec_method(const std::string& text) {
  SpecMethod m;
  std::string rest;
  if (text.empty()) return m;
  if (text == "ngram") {
    m.kind = SpecMethod::Kind::kNgram;
  } else if (starts_with(text, "draft:", rest)) {
    if (rest.empty()) throw Error("--spec draft:PATH needs the path of a GGUF draft model", ExitCode::kUsage);
    m.kind = SpecMethod::Kind::kDraftModel;
    m.draft_path = rest;
  } else if (starts_with(text, "head:", rest)) {
    if (rest.empty()) throw Error("--spec head:PATH needs the path of a GGUF draft head", ExitCode::kUsage);
    m.kind = SpecMethod::Kind::kHead;
    m.draft_path = rest;
  } else if (starts_with(text, "layerskip:", rest)) {
    int32_t layers = 0;
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), layers);
    if (rest.empty() || ec != std::errc() || ptr != rest.data() + rest.size())
      throw Error(strformat("--spec %s: '%s' is not a number of layers", text.c_str(), rest.c_str()),
                  ExitCode::kUsage);
    m.kind = SpecMethod::Kind::kLayerSkip;
    m.layers = layers;
  } else {
    throw Error(strformat("--spec %s is not a known method (known: %s)", text.c_str(), kKnown), ExitCode::kUsage);
  }
  return m;
}

}  // namespace exactly
