#include "engine/draft_model.h"

#include <string_view>

#include <optional>

#include "core/error.h"
#include "core/format.h"
#include "model/draft_head.h"
#include "model/llama.h"
#ifdef EXACTLY_WITH_CUDA
#include "model/cuda/draft_head_cuda.h"
#include "model/cuda/llama_cuda.h"
#endif

namespace exactly {

namespace {

// A token's text as it may appear in a message: control bytes escaped.
std::string shown(const std::string& text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? strformat("\\x%02x", u) : std::string(1, c);
  }
  return out;
}

std::string shown(std::optional<int32_t> id) { return id ? std::to_string(*id) : "none"; }

}  // namespace

void check_same_vocabulary(const LoadedModel& target, const LoadedModel& draft, const std::string& draft_path) {
  auto fail = [&](const std::string& what) {
    throw Error(strformat("--spec draft:%s: the draft model's vocabulary differs from the target's: %s",
                          draft_path.c_str(), what.c_str()),
                ExitCode::kUsage);
  };
  const Tokenizer& t = *target.tokenizer;
  const Tokenizer& d = *draft.tokenizer;
  if (draft.config().vocab_size != target.config().vocab_size)
    fail(strformat("its embedding has %d rows, the target's %d", draft.config().vocab_size,
                   target.config().vocab_size));
  if (d.vocab_size() != t.vocab_size())
    fail(strformat("it has %d tokens, the target %d", d.vocab_size(), t.vocab_size()));
  for (int32_t id = 0; id < t.vocab_size(); ++id)
    if (d.token_text(id) != t.token_text(id))
      fail(strformat("token %d is '%s' in the draft and '%s' in the target", id, shown(d.token_text(id)).c_str(),
                     shown(t.token_text(id)).c_str()));
  if (d.bos_id() != t.bos_id())
    fail(strformat("its BOS token is %s, the target's %s", shown(d.bos_id()).c_str(), shown(t.bos_id()).c_str()));
  if (d.eos_id() != t.eos_id())
    fail(strformat("its EOS token is %s, the target's %s", shown(d.eos_id()).c_str(), shown(t.eos_id()).c_str()));
}

std::unique_ptr<LoadedModel> load_draft_model(const std::string& path, const LoadedModel& target) {
  std::unique_ptr<LoadedModel> draft;
  try {
    // The draft runs where and as the target runs (device, --deterministic,
    // --enforce-eager); it is always a file, never random weights.
    LoadOptions options = target.options;
    options.tensor_parallel_size = 1;  // a draft model is small: it runs whole
    options.format = LoadFormat::kAuto;
    draft = std::make_unique<LoadedModel>(load_model(path, false, options));
  } catch (const FileFormatError& e) {
    throw FileFormatError(strformat("--spec draft:%s: %s", path.c_str(), e.what()));
  }
  check_same_vocabulary(target, *draft, path);
  return draft;
}

std::unique_ptr<Model> load_draft_head(const std::string& path, const LoadedModel& target) {
  try {
    if (const auto* llama = dynamic_cast<const LlamaModel*>(target.model.get())) return DraftHead::load(path, *llama);
#ifdef EXACTLY_WITH_CUDA
    if (const auto* cuda = dynamic_cast<const CudaLlamaModel*>(target.model.get()))
      return CudaDraftHead::load(path, *cuda);
#endif
  } catch (const FileFormatError& e) {
    throw FileFormatError(strformat("--spec head:%s: %s", path.c_str(), e.what()));
  }
  throw Error(strformat("--spec head:%s: draft heads attach to a llama model of one rank (this target: %s on %s)",
                        path.c_str(), target.config().architecture.c_str(), target.model->device()),
              ExitCode::kBadInput);
}

}  // namespace exactly
