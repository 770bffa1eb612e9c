// Small vocabularies built in the tests themselves, so the tokenizer logic is
// checked without a model file.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer.h"

namespace exactly::testing {

// A byte-level BPE spec: ids 0..255 are the single bytes (in byte order),
// then the result of each merge (given as raw byte strings "left", "right")
// in merge order, then the `specials` as control tokens.
inline TokenizerSpec byte_level_spec(const std::vector<std::pair<std::string, std::string>>& merges,
                                     const std::string& pre = "gpt2",
                                     const std::vector<std::string>& specials = {}) {
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = pre;
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(byte_unicode::char_for_byte(static_cast<uint8_t>(b)));
  for (const auto& [l, r] : merges) {
    const std::string lt = byte_unicode::from_bytes(l), rt = byte_unicode::from_bytes(r);
    spec.merges.push_back(lt + " " + rt);
    bool known = false;
    for (const std::string& t : spec.tokens) known = known || t == lt + rt;
    if (!known) spec.tokens.push_back(lt + rt);
  }
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  for (const std::string& s : specials) {
    spec.tokens.push_back(s);
    spec.types.push_back(TokenType::kControl);
  }
  return spec;
}

// Raw bytes of each token of `ids`.
inline std::vector<std::string> pieces(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(tok.token_bytes(id, true));
  return out;
}

}  // namespace exactly::testing
