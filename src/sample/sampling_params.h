// How one request turns logits into tokens.
#pragma once

#include <cstdint>
#include <optional>

namespace exactly {

struct SamplingParams {
  float temperature = 0.8f;        // <= 0 means greedy (argmax)
  int32_t top_k = 40;              // <= 0 disables
  float top_p = 0.95f;             // >= 1 disables
  float min_p = 0.05f;             // <= 0 disables
  float repetition_penalty = 1.0f; // 1 disables; applied to tokens already in the context
  int32_t repetition_window = 64;  // recent tokens the repetition penalty looks at (-1: all)
  float frequency_penalty = 0.0f;  // subtracted once per occurrence in the output so far
  float presence_penalty = 0.0f;   // subtracted once if the token occurs in the output so far
  std::optional<uint64_t> seed;    // none: drawn from the system's entropy

  bool greedy() const { return temperature <= 0.0f; }
};

}  // namespace exactly
