// Hyperparameters of a llama-family model, read from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>

namespace exactly {

class GGUFFile;

struct ModelConfig {
  std::string architecture;  // general.architecture
  std::string name;          // general.name
  int32_t n_layers = 0;
  int32_t dim = 0;           // embedding length
  int32_t ffn_dim = 0;       // feed-forward hidden size
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t rope_dims = 0;     // leading dims of each head that are rotated
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  int32_t context_length = 0;
  int32_t vocab_size = 0;

  // Reads "<arch>.*" keys; throws FileFormatError naming a missing/invalid key.
  static ModelConfig from_gguf(const GGUFFile& file);
};

}  // namespace exactly
