#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "core/format.h"
#include "loader/gguf.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/wordpiece_tokenizer.h"

namespace exactly {
namespace {

void check_id(const std::optional<int32_t>& id, const char* key, size_t vocab) {
  if (id && (*id < 0 || static_cast<size_t>(*id) >= vocab)) {
    throw FileFormatError(strformat("%s: token id %d is outside the vocabulary of %zu tokens", key, *id, vocab));
  }
}

// Texts of control tokens that end a turn in the chat formats we know, for
// models whose metadata names only EOS.
constexpr std::array<std::string_view, 7> kEndOfTurnTexts = {
    "<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|end_of_text|>",
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::create(const TokenizerSpec& spec) {
  if (spec.model == "gpt2") return std::make_unique<BpeTokenizer>(spec);
  if (spec.model == "llama") return std::make_unique<SpmTokenizer>(spec);
  if (spec.model == "bert") return std::make_unique<WordPieceTokenizer>(spec);
  throw FileFormatError(strformat("tokenizer.ggml.model: unsupported tokenizer model '%s' (supported: gpt2, llama, bert)",
                                  spec.model.c_str()));
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GGUFFile& file) { return create(spec_from_gguf(file)); }

Tokenizer::Tokenizer(const TokenizerSpec& spec)
    : tokens_(spec.tokens), types_(spec.types), bos_(spec.bos), eos_(spec.eos), chat_template_(spec.chat_template) {
  const size_t vocab = tokens_.size();
  if (vocab == 0) throw FileFormatError("tokenizer.ggml.tokens: the vocabulary is empty");
  if (types_.empty()) types_.assign(vocab, TokenType::kNormal);
  if (types_.size() != vocab) {
    throw FileFormatError(strformat("tokenizer.ggml.token_type: %zu entries for %zu tokens", types_.size(), vocab));
  }
  for (size_t i = 0; i < vocab; ++i) {
    const auto t = static_cast<int32_t>(types_[i]);
    if (t < 1 || t > 6) {
      throw FileFormatError(strformat("tokenizer.ggml.token_type[%zu]: unknown token type %d", i, t));
    }
  }
  check_id(spec.bos, "tokenizer.ggml.bos_token_id", vocab);
  check_id(spec.eos, "tokenizer.ggml.eos_token_id", vocab);
  check_id(spec.eot, "tokenizer.ggml.eot_token_id", vocab);
  check_id(spec.eom, "tokenizer.ggml.eom_token_id", vocab);
  check_id(spec.unk, "tokenizer.ggml.unknown_token_id", vocab);
  const bool spm = spec.model == "llama";
  add_bos_ = spec.add_bos.value_or(spm);
  add_eos_ = spec.add_eos.value_or(false);
  token_ids_.reserve(vocab);
  for (size_t i = 0; i < vocab; ++i) token_ids_[tokens_[i]] = static_cast<int32_t>(i);

  for (const auto& id : {spec.eos, spec.eot, spec.eom}) {
    if (id) end_of_generation_.push_back(*id);
  }
  for (size_t i = 0; i < vocab; ++i) {
    if (types_[i] != TokenType::kControl) continue;
    if (std::find(kEndOfTurnTexts.begin(), kEndOfTurnTexts.end(), tokens_[i]) != kEndOfTurnTexts.end()) {
      end_of_generation_.push_back(static_cast<int32_t>(i));
    }
  }
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const auto it = token_ids_.find(std::string(text));
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) != end_of_generation_.end();
}

}  // namespace exactly
