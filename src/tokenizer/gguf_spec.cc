// Reading TokenizerSpec from GGUF metadata (tokenizer.ggml.* keys).
#include <limits>

#include "core/error.h"
#include "core/format.h"
#include "loader/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece_spec.h"

namespace exactly {
namespace {

std::optional<int32_t> optional_id(const GGUFFile& file, const char* key) {
  const std::optional<int64_t> v = file.get_int(key);
  if (!v) return std::nullopt;
  if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    throw FileFormatError(strformat("%s: token id %lld does not fit in 32 bits", key, static_cast<long long>(*v)));
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

TokenizerSpec Tokenizer::spec_from_gguf(const GGUFFile& file) {
  TokenizerSpec spec;
  spec.model = file.require_string("tokenizer.ggml.model");
  auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) throw FileFormatError("tokenizer.ggml.tokens: missing (an array of strings is required)");
  spec.tokens = std::move(*tokens);
  if (auto types = file.get_int_array("tokenizer.ggml.token_type")) {
    spec.types.reserve(types->size());
    for (size_t i = 0; i < types->size(); ++i) {
      const int64_t t = (*types)[i];
      if (t < 1 || t > 6) {
        throw FileFormatError(strformat("tokenizer.ggml.token_type[%zu]: unknown token type %lld", i,
                                        static_cast<long long>(t)));
      }
      spec.types.push_back(static_cast<TokenType>(t));
    }
  }
  if (auto scores = file.get_float_array("tokenizer.ggml.scores")) spec.scores = std::move(*scores);
  // A "llama" tokenizer merges by score; merges there would restrict it to the
  // listed pairs (TokenizerSpec::merges), which SentencePiece does not do.
  if (spec.model != "llama") {
    if (auto merges = file.get_string_array("tokenizer.ggml.merges")) spec.merges = std::move(*merges);
  }
  if (auto pre = file.get_string("tokenizer.ggml.pre")) spec.pre = *pre;
  spec.bos = optional_id(file, "tokenizer.ggml.bos_token_id");
  spec.eos = optional_id(file, "tokenizer.ggml.eos_token_id");
  spec.eot = optional_id(file, "tokenizer.ggml.eot_token_id");
  spec.eom = optional_id(file, "tokenizer.ggml.eom_token_id");
  spec.unk = optional_id(file, "tokenizer.ggml.unknown_token_id");
  spec.add_bos = file.get_bool("tokenizer.ggml.add_bos_token");
  spec.add_eos = file.get_bool("tokenizer.ggml.add_eos_token");
  spec.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix");
  if (auto tmpl = file.get_string("tokenizer.chat_template")) spec.chat_template = *tmpl;
  if (spec.model == "bert") read_wordpiece_gguf(spec);
  return spec;
}

}  // namespace exactly
