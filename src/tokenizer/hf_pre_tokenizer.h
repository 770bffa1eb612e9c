// Which of PreTokenizer's families a tokenizer.json describes: its normalizer
// and pre_tokenizer are reduced to the sequence of regex splits they perform
// and compared with the published configurations of GPT-2, SmolLM2, Llama 3
// and Qwen2.
#pragma once

#include <string>

namespace exactly {

class JsonObject;

// The PreTokenizer name ("gpt2", "smollm", "llama-bpe", "qwen2") for the root
// object of a tokenizer.json. Throws FileFormatError naming the key when the
// configuration is not byte-level or splits differently from all of them.
std::string hf_pre_tokenizer_name(const JsonObject& root);

// Whether the tokenizer.json's normalizer is NFC (Qwen2's; the only one a
// byte-level tokenizer may have, which hf_pre_tokenizer_name checks).
bool hf_normalizes_nfc(const JsonObject& root);

}  // namespace exactly
