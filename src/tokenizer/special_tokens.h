// Splits text at the literal texts of control and user-defined tokens
// ("<|im_start|>") so they become single tokens instead of being tokenized as
// ordinary characters. User-defined tokens (a tokenizer's added tokens that
// are not special, such as GPT-NeoX's runs of spaces) are split out of every
// text, as Hugging Face's tokenizers do; control tokens only where the caller
// parses special tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace exactly {

struct TextFragment {
  std::string_view text;  // the raw text, when token < 0
  int32_t token;          // a special token id, or -1 for raw text
  size_t offset;          // byte offset of the fragment in the input
};

class SpecialTokenSplitter {
 public:
  // tokens, types: [vocab]; control and user-defined tokens become splittable.
  SpecialTokenSplitter(const std::vector<std::string>& tokens, const std::vector<TokenType>& types);

  // Fragments covering `text` in order. Scanning left to right, the longest
  // special text starting at each position wins (leftmost-longest); control
  // tokens are candidates only when `parse_special`.
  std::vector<TextFragment> split(std::string_view text, bool parse_special) const;

 private:
  const std::vector<std::string>& tokens_;
  const std::vector<TokenType>& types_;
  bool any_user_defined_ = false;  // without them, a text not parsed for specials is one fragment
  std::array<std::vector<int32_t>, 256> by_first_byte_;  // [256][candidates] ids, longest text first
};

}  // namespace exactly
