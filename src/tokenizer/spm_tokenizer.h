// SentencePiece-style vocabularies (tokenizer.ggml.model = "llama"): spaces
// become U+2581 "▁", characters are merged greedily by the score of the
// concatenated piece, and characters the vocabulary lacks fall back to
// <0xNN> byte tokens. With merges (a tokenizer.json's SentencePiece-style BPE)
// only the listed pairs merge, lowest rank first.
#pragma once

#include <array>
#include <unordered_map>

#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace exactly {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(const TokenizerSpec& spec);

  std::vector<int32_t> encode(std::string_view text, bool parse_special) const override;
  std::string token_bytes(int32_t id, bool render_special = false) const override;
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const override;

  bool add_space_prefix() const { return add_space_prefix_; }

 private:
  void encode_fragment(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
  std::optional<int32_t> piece_id(std::string_view piece) const;

  SpecialTokenSplitter specials_;
  std::vector<float> scores_;                                 // [vocab]
  std::unordered_map<std::string_view, int32_t> pieces_;      // text -> id of normal/user-defined tokens
  std::array<int32_t, 256> byte_token_;                       // [256] id of <0xNN>, -1 if absent
  // Hugging Face BPE (spec.merges): "left right" -> rank; only these pairs merge.
  std::unordered_map<std::string, int32_t> merge_rank_;
  std::optional<int32_t> unk_;
  bool add_space_prefix_, prefix_after_special_, prefix_unless_space_;
};

}  // namespace exactly
