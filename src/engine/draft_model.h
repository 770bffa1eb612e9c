// The draft model of `--spec draft:PATH`: loaded beside the target and
// checked to speak the same vocabulary, since its token ids are proposed to
// the target as they are.
#pragma once

#include <memory>
#include <string>

#include "engine/loaded_model.h"
#include "model/model.h"

namespace exactly {

// Throws FileFormatError (exit code 2) when `path` is not a valid model, and
// Error(kUsage) naming the first difference when its vocabulary is not the
// target's (see check_same_vocabulary).
std::unique_ptr<LoadedModel> load_draft_model(const std::string& path, const LoadedModel& target);

// The draft head of `--spec head:PATH`, checked against the target, on the
// target's device (model/draft_head.h, model/cuda/draft_head_cuda.h).
// Throws FileFormatError (exit code 2) naming the path and what is wrong, and
// Error(kBadInput) when the target is not a llama model of one rank.
std::unique_ptr<Model> load_draft_head(const std::string& path, const LoadedModel& target);

// Same vocabulary: as many embedding rows, the same token texts in the same
// order and the same BOS/EOS ids. Throws
// Error(kUsage), naming `draft_path` and what differs, otherwise.
void check_same_vocabulary(const LoadedModel& target, const LoadedModel& draft, const std::string& draft_path);

}  // namespace exactly
