// `exactly info`: what a model file holds and what running it costs.
#include <cstdio>
#include <map>
#include <tuple>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/loaded_model.h"
#include "core/error.h"
#include "core/format.h"
#include "model/kv_storage.h"

namespace exactly::cli {

namespace {

bool is_token_list(const std::string& key) {
  return key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.merges" ||
         key == "tokenizer.ggml.token_type" || key == "tokenizer.ggml.scores";
}

// The GGUF file's metadata and tensors; the total bytes and parameters of its tensors.
std::pair<uint64_t, int64_t> print_gguf(const GGUFFile& f, bool all_tensors) {
  std::printf("file: %s\n", f.path().c_str());
  std::printf("gguf version: %u, alignment: %llu, %zu metadata keys, %zu tensors, %s\n", f.version(),
              static_cast<unsigned long long>(f.alignment()), f.metadata().size(), f.tensors().size(),
              human_bytes(static_cast<double>(f.file_size())).c_str());
  std::printf("\nmetadata:\n");
  for (const auto& [key, value] : f.metadata()) {
    if (key == "tokenizer.chat_template") {
      std::printf("  %-42s (%zu characters)\n", key.c_str(), std::get<std::string>(value.v).size());
      continue;
    }
    std::printf("  %-42s %s\n", key.c_str(), gguf_value_to_string(value, is_token_list(key) ? 4 : 8).c_str());
  }

  std::map<std::string, std::pair<int, uint64_t>> by_type;  // type -> (count, bytes)
  uint64_t weight_bytes = 0;
  int64_t params = 0;
  for (const auto& t : f.tensors()) {
    auto& e = by_type[std::string(ggml_type_name(t.type))];
    e.first++;
    e.second += t.nbytes;
    weight_bytes += t.nbytes;
    params += t.num_elements();
  }
  std::printf("\ntensors by type:\n");
  for (const auto& [name, e] : by_type)
    std::printf("  %-6s %4d tensors  %s\n", name.c_str(), e.first, human_bytes(static_cast<double>(e.second)).c_str());
  if (all_tensors) {
    std::printf("\ntensors:\n");
    for (const auto& t : f.tensors()) {
      std::string shape;
      for (size_t i = 0; i < t.shape.size(); ++i) shape += strformat("%s%lld", i ? " x " : "", static_cast<long long>(t.shape[i]));
      std::printf("  %-32s %-5s [%s] at %llu\n", t.name.c_str(), std::string(ggml_type_name(t.type)).c_str(),
                  shape.c_str(), static_cast<unsigned long long>(t.offset));
    }
  }
  return {weight_bytes, params};
}

void run(const ModelOptions& o, bool all_tensors) {
  LoadedModel m = load_model(o.model, false);
  const ModelConfig& c = m.config();
  uint64_t weight_bytes = 0;
  int64_t params = 0;
  if (m.file != nullptr) {
    std::tie(weight_bytes, params) = print_gguf(*m.file, all_tensors);
  } else {
    if (all_tensors) throw Error("--tensors lists a GGUF file's tensors; this is a Hugging Face checkpoint",
                                 ExitCode::kUsage);
    std::printf("Hugging Face checkpoint: %s (weights as stored, %s)\n", o.model.c_str(), c.dtype.c_str());
    weight_bytes = static_cast<uint64_t>(m.model->weight_bytes());
  }
  const int64_t kv_slot = KVStorage::bytes_per_slot(c);
  if (params > 0)
    std::printf("\nmodel: %s (%s), %.1f M parameters\n", c.name.c_str(), c.architecture.c_str(),
                static_cast<double>(params) / 1e6);
  else
    std::printf("\nmodel: %s (%s)\n", c.name.c_str(), c.architecture.c_str());
  std::printf("  layers %d, dim %d, ffn %d, heads %d (kv %d, head dim %d), vocab %d, context %d, rope base %g\n",
              c.n_layers, c.dim, c.ffn_dim, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size, c.context_length,
              static_cast<double>(c.rope_freq_base));
  std::printf("memory estimate:\n");
  std::printf("  weights (used in place, memory-mapped): %s\n", human_bytes(static_cast<double>(weight_bytes)).c_str());
  std::printf("  KV cache (fp32): %s per token, %s for the full context of %d tokens\n",
              human_bytes(static_cast<double>(kv_slot)).c_str(),
              human_bytes(static_cast<double>(kv_slot) * c.context_length).c_str(), c.context_length);
  const double act = 4.0 * 512 * (4.0 * c.dim + 3.0 * c.n_heads * c.head_dim + 2.0 * c.ffn_dim) + 4.0 * c.vocab_size;
  std::printf("  activations for a 512-token chunk: %s\n", human_bytes(act).c_str());
  std::printf("tokenizer: %d tokens, bos %d, eos %d, add bos %s\n", m.tokenizer->vocab_size(),
              m.tokenizer->bos_id().value_or(-1), m.tokenizer->eos_id().value_or(-1),
              m.tokenizer->add_bos() ? "yes" : "no");
}

}  // namespace

void register_info(CLI::App& app) {
  auto o = std::make_shared<ModelOptions>();
  auto all = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("info", "show a model's metadata, tensor types and memory needs");
  add_model_options(*cmd, *o);
  cmd->add_flag("--tensors", *all, "list every tensor");
  cmd->callback([o, all] { run(*o, *all); });
}

}  // namespace exactly::cli
