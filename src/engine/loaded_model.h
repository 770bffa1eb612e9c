// Everything that comes out of one model file: the mapping, the config, the
// weights and the tokenizer.
#pragma once

#include <memory>
#include <string>

#include "loader/gguf.h"
#include "model/llama.h"
#include "tokenizer/tokenizer.h"

namespace exactly {

struct LoadedModel {
  std::unique_ptr<GGUFFile> file;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<Tokenizer> tokenizer;

  const ModelConfig& config() const { return model->config(); }
};

// Opens and validates `path`. With show_progress, pages the weights in while
// drawing a progress bar on stderr (only when stderr is a terminal).
// Throws FileFormatError (exit code 2) for a bad file.
LoadedModel load_model(const std::string& path, bool show_progress);

}  // namespace exactly
