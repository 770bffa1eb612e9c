// What `--spec METHOD` names: which proposer drafts tokens for speculative
// decoding, and its argument.
#pragma once

#include <cstdint>
#include <string>

namespace exactly {

struct SpecMethod {
  enum class Kind {
    kNone,       // ""
    kNgram,      // "ngram": prompt lookup in the request's own tokens
    kDraftModel, // "draft:PATH": a second, smaller model with the same vocabulary
    kLayerSkip,  // "layerskip:L": the target's first L layers, final norm and head
    kHead,       // "head:PATH": a draft head reading the target's hidden states (model/draft_head.h)
  };
  Kind kind = Kind::kNone;
  std::string draft_path;  // kDraftModel: the model; kHead: the head
  int32_t layers = 0;      // kLayerSkip; checked against the model by the engine
};

// Throws Error(kUsage) naming the value and the known methods for anything
// that is not one of the forms above.
SpecMethod parse_spec_method(const std::string& text);

}  // namespace exactly
