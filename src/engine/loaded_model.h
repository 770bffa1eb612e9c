// Everything that comes out of one model file: the mapping, the config, the
// weights and the tokenizer.
#pragma once

#include <memory>
#include <string>

#include "loader/gguf.h"
#include "model/llama.h"
#include "tokenizer/tokenizer.h"

namespace exactly {


enum class Device { kCpu, kCuda };

enum class LoadFormat {
  kAuto,   // GGUF; a directory, .json or .safetensors path: a Hugging Face checkpoint
  kDummy,  // random weights of the shape a config.json gives (benchmarks); needs a GPU
};

struct LoadOptions {
  Device device = Device::kCpu;
  LoadFormat format = LoadFormat::kAuto;
  bool deterministic = true;   // GPU: the canonical order (batch-invariant bits)
  bool cuda_graphs = true;     // GPU: replay decode steps as CUDA graphs
  uint64_t seed = 0;           // of dummy weights
  std::string chat_template;   // when not empty, replaces the model's (checked to parse)
  int tensor_parallel_size = 1;  // CPU: ranks the model is split over (model/tensor_parallel.h)
  int threads = 1;               // CPU kernel threads a tensor-parallel model shares out between its ranks
};

struct LoadedModel {
  std::unique_ptr<GGUFFile> file;  // null for dummy weights and Hugging Face checkpoints
  std::unique_ptr<Model> model;  // LlamaModel on the CPU, CudaLlamaModel on a GPU
  std::unique_ptr<Tokenizer> tokenizer;
  LoadOptions options;  // how it was loaded (a draft model is loaded the same way)

  const ModelConfig& config() const { return model->config(); }
};

// Parse "cpu" / "cuda" and "auto" / "dummy"; throw Error(kUsage) naming anything else.
Device parse_device(const std::string& name);
LoadFormat parse_load_format(const std::string& name);

// A path that names a Hugging Face checkpoint rather than a GGUF file: a
// directory, or a .json / .safetensors file (its directory is the checkpoint).
bool is_hf_checkpoint(const std::string& path);
std::string hf_checkpoint_dir(const std::string& path);

// Opens and validates `path`. With show_progress, pages the weights in while
// drawing a progress bar on stderr (only when stderr is a terminal).
// Throws FileFormatError (exit code 2) for a bad file, Error(kUsage) for a
// device this build or machine does not have.
LoadedModel load_model(const std::string& path, bool show_progress, const LoadOptions& options = {});

}  // namespace exactly
