#include "engine/loaded_model.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "core/format.h"
#include "kernels/cuda/moe_limits.h"
#include "model/hf_config.h"
#include "model/tensor_parallel.h"
#include "tokenizer/chat_template.h"
#ifdef EXACTLY_WITH_CUDA
#include "model/cuda/llama_cuda.h"
#endif

namespace exactly {

namespace {

namespace kc = kernels::cuda;

// Reads one byte per page so the first forward pass does not stall on page
// faults, reporting progress as it goes.
void page_in(const GGUFFile& file, bool draw) {
  uint64_t total = 0, done = 0;
  for (const auto& t : file.tensors()) total += t.nbytes;
  volatile uint8_t sink = 0;
  int last_percent = -1;
  for (const auto& t : file.tensors()) {
    for (uint64_t off = 0; off < t.nbytes; off += 4096) sink = static_cast<uint8_t>(sink + t.data[off]);
    done += t.nbytes;
    int percent = total ? static_cast<int>(100 * done / total) : 100;
    if (draw && percent != last_percent) {
      last_percent = percent;
      const int width = 30, filled = percent * width / 100;
      std::fprintf(stderr, "\rloading %s [%.*s%*s] %3d%%", file.path().c_str(), filled,
                   "##############################", width - filled, "", percent);
    }
  }
  if (draw) std::fprintf(stderr, "\r\033[K");
}

}  // namespace

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  throw Error(strformat("--device '%s': expected cpu or cuda", name.c_str()), ExitCode::kUsage);
}

LoadFormat parse_load_format(const std::string& name) {
  if (name == "auto" || name == "gguf") return LoadFormat::kAuto;
  if (name == "dummy") return LoadFormat::kDummy;
  throw Error(strformat("--load-format '%s': expected auto or dummy", name.c_str()), ExitCode::kUsage);
}

namespace {

// Token texts "<0>", "<1>", ...: enough to run and detokenize a model whose
// checkpoint came without a tokenizer (dummy weights for benchmarks).
std::unique_ptr<Tokenizer> placeholder_tokenizer(int32_t vocab_size) {
  TokenizerSpec spec;
  spec.model = "gpt2";
  for (int32_t i = 0; i < vocab_size; ++i) spec.tokens.push_back(strformat("<%d>", i));
  spec.eos = vocab_size - 1;
  return Tokenizer::create(spec);
}

// The checkpoint directory of `path`: itself, or the folder of a file in it.
std::filesystem::path checkpoint_dir(const std::string& path) {
  const std::filesystem::path p(path);
  return std::filesystem::is_directory(p) ? p : p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
}

std::unique_ptr<Tokenizer> hf_tokenizer(const std::filesystem::path& dir, const ModelConfig& config) {
  return std::filesystem::exists(dir / "tokenizer.json") ? Tokenizer::from_hf(dir.string())
                                                         : placeholder_tokenizer(config.vocab_size);
}

// What the CPU model computes and the GPU model does not yet: refused by
// name on the GPU rather than computed as another model.
void check_gpu_supports(const std::string& path, const ModelConfig& c) {
  std::string what;
  if (c.architecture == "gpt-oss") what = "gpt-oss (attention sinks, sliding windows, biased experts)";
  else if (c.n_experts > 0 && (c.expert_biases || c.n_experts > kc::kMoeMaxExperts || c.n_experts_used > kc::kMoeMaxChosen))
    what = strformat("%s's experts (%d of %d a token, biases %s; the GPU takes at most %d of %d, no biases)",
                     c.architecture.c_str(), c.n_experts_used, c.n_experts, c.expert_biases ? "yes" : "no",
                     kc::kMoeMaxChosen, kc::kMoeMaxExperts);
  else if (c.n_experts > 0 && (c.dim % kc::kMoeTileK != 0 || c.expert_ffn_dim % kc::kMoeTileK != 0))
    what = strformat("%s's experts of width %d over dim %d (the GPU's expert products take multiples of %d)",
                     c.architecture.c_str(), c.expert_ffn_dim, c.dim, kc::kMoeTileK);
  if (!what.empty())
    throw Error(strformat("%s: %s run on --device cpu only so far", path.c_str(), what.c_str()), ExitCode::kUsage);
}

// The CPU model, split over ranks when asked.
std::unique_ptr<Model> cpu_model(std::unique_ptr<LlamaModel> model, const LoadOptions& options) {
  if (options.tensor_parallel_size <= 1) return model;
  return std::make_unique<TensorParallelModel>(std::move(model), options.tensor_parallel_size, options.threads);
}

// What the GPU does not split yet.
void check_gpu_tensor_parallel(const LoadOptions& options) {
  if (options.tensor_parallel_size > 1)
    throw Error("--tensor-parallel-size above 1 runs on --device cpu only so far (the GPUs' NCCL path is not built)",
                ExitCode::kUsage);
}

LoadedModel load_dummy(const std::string& path, const LoadOptions& options) {
  LoadedModel m;
  ModelConfig config = read_hf_config(path);
  m.tokenizer = hf_tokenizer(checkpoint_dir(path), config);
#ifdef EXACTLY_WITH_CUDA
  if (options.device != Device::kCuda)
    throw Error("--load-format dummy needs --device cuda (random weights are made on the GPU)", ExitCode::kUsage);
  cap_context_at_windows(config);
  check_gpu_supports(path, config);
  check_gpu_tensor_parallel(options);
  CudaModelOptions cuda;
  cuda.deterministic = options.deterministic;
  cuda.cuda_graphs = options.cuda_graphs;
  m.model = CudaLlamaModel::with_random_weights(std::move(config), options.seed, cuda);
  return m;
#else
  (void)options;
  throw Error("--load-format dummy needs --device cuda, and this build of exactly has no CUDA backend",
              ExitCode::kUsage);
#endif
}

LoadedModel load_hf(const std::string& path, const LoadOptions& options) {
  const std::filesystem::path dir = checkpoint_dir(path);
  ModelConfig config = read_hf_config(dir.string());
  LoadedModel m;
  m.tokenizer = hf_tokenizer(dir, config);
  if (options.device == Device::kCpu) {
    if (options.tensor_parallel_size > 1) check_tensor_parallel(config, options.tensor_parallel_size);
    auto weights = std::make_unique<HfWeights>(HfWeights::open(dir.string(), config));
    m.model = cpu_model(std::make_unique<LlamaModel>(std::move(weights), std::move(config)), options);
    return m;
  }
  cap_context_at_windows(config);
  check_gpu_supports(path, config);
  check_gpu_tensor_parallel(options);
#ifdef EXACTLY_WITH_CUDA
  CudaModelOptions cuda;
  cuda.deterministic = options.deterministic;
  cuda.cuda_graphs = options.cuda_graphs;
  m.model = CudaLlamaModel::from_hf(dir.string(), std::move(config), cuda);
  return m;
#else
  throw Error("--device cuda: this build of exactly has no CUDA backend (nvcc was not found when it was built)",
              ExitCode::kUsage);
#endif
}

std::unique_ptr<Model> make_model(const GGUFFile& file, ModelConfig config, const LoadOptions& options) {
  if (options.device == Device::kCpu) {
    if (options.tensor_parallel_size > 1) check_tensor_parallel(config, options.tensor_parallel_size);
    return cpu_model(std::make_unique<LlamaModel>(file, std::move(config)), options);
  }
  cap_context_at_windows(config);
  check_gpu_supports(file.path(), config);
  check_gpu_tensor_parallel(options);
#ifdef EXACTLY_WITH_CUDA
  CudaModelOptions cuda;
  cuda.deterministic = options.deterministic;
  cuda.cuda_graphs = options.cuda_graphs;
  return CudaLlamaModel::from_gguf(file, std::move(config), cuda);
#else
  throw Error("--device cuda: this build of exactly has no CUDA backend (nvcc was not found when it was built)",
              ExitCode::kUsage);
#endif
}

}  // namespace

bool is_hf_checkpoint(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  return std::filesystem::is_directory(path) || ext == ".json" || ext == ".safetensors";
}

std::string hf_checkpoint_dir(const std::string& path) { return checkpoint_dir(path).string(); }

LoadedModel load_model(const std::string& path, bool show_progress, const LoadOptions& options) {
  LoadedModel m;
  if (options.format == LoadFormat::kDummy) {
    m = load_dummy(path, options);
  } else if (is_hf_checkpoint(path)) {
    m = load_hf(path, options);
  } else {
    m.file = GGUFFile::open(path);
    ModelConfig config = ModelConfig::from_gguf(*m.file);
    m.tokenizer = Tokenizer::from_gguf(*m.file);
    page_in(*m.file, show_progress && isatty(STDERR_FILENO));
    m.model = make_model(*m.file, std::move(config), options);
  }
  if (!options.chat_template.empty()) {
    try {
      ChatTemplate::parse(options.chat_template);
    } catch (const Error& e) {
      throw Error(std::string("--chat-template: ") + e.what(), ExitCode::kBadInput);
    }
    m.tokenizer->set_chat_template(options.chat_template);
  }
  m.options = options;
  return m;
}

}  // namespace exactly
