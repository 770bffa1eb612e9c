// WordPiece vocabularies (tokenizer.ggml.model = "bert"; a tokenizer.json
// whose model is WordPiece): the text is normalized and split into words
// (wordpiece_normalizer.h), and each word is cut greedily into the longest
// tokens of the vocabulary from its start, every token after the first
// spelled with the continuing prefix ("##"). A word that cannot be cut so,
// or is longer than max_input_chars_per_word, becomes the unknown token.
#pragma once

#include <unordered_map>

#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace exactly {

class WordPieceTokenizer final : public Tokenizer {
 public:
  // Throws FileFormatError when the vocabulary has no unknown token.
  explicit WordPieceTokenizer(const TokenizerSpec& spec);

  std::vector<int32_t> encode(std::string_view text, bool parse_special) const override;
  // The token as the decoder writes it after the first: " word", or the rest
  // of a continuing token without its prefix.
  std::string token_bytes(int32_t id, bool render_special = false) const override;
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const override;

 private:
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  std::optional<int32_t> lookup(std::string_view text) const;
  std::string piece(int32_t id, bool first) const;

  WordPieceOptions options_;
  SpecialTokenSplitter specials_;
  std::unordered_map<std::string_view, int32_t> vocab_;  // text -> id of every token but unused ones
  size_t max_token_bytes_ = 0;                           // longest token text, prefix included
  int32_t unk_ = -1;
};

}  // namespace exactly
