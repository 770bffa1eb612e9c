// ModelConfig from a Hugging Face checkpoint's config.json (Llama 2/3,
// SmolLM2, Mistral, Qwen2/2.5).
#pragma once

#include <string>

#include "model/config.h"

namespace exactly {

// `path` is config.json or the checkpoint directory holding it. Throws
// FileFormatError naming the file and the key for a missing or ill-typed key,
// an architecture other than LlamaForCausalLM, MistralForCausalLM or
// Qwen2ForCausalLM, and for anything the model would compute differently from
// the reference (rope_scaling, another activation, quantized weights).
ModelConfig read_hf_config(const std::string& path);

}  // namespace exactly
