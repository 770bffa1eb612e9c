#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace exactly {

SpecialTokenSplitter::SpecialTokenSplitter(const std::vector<std::string>& tokens,
                                           const std::vector<TokenType>& types)
    : tokens_(tokens), types_(types) {
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (types[id] != TokenType::kControl && types[id] != TokenType::kUserDefined) continue;
    if (tokens[id].empty()) continue;
    any_user_defined_ = any_user_defined_ || types[id] == TokenType::kUserDefined;
    by_first_byte_[static_cast<uint8_t>(tokens[id][0])].push_back(static_cast<int32_t>(id));
  }
  for (auto& candidates : by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](int32_t a, int32_t b) {
      return tokens[static_cast<size_t>(a)].size() > tokens[static_cast<size_t>(b)].size();
    });
  }
}

std::vector<TextFragment> SpecialTokenSplitter::split(std::string_view text, bool parse_special) const {
  std::vector<TextFragment> out;
  if (!parse_special && !any_user_defined_) {
    if (!text.empty()) out.push_back({text, -1, 0});
    return out;
  }
  size_t raw_begin = 0;
  for (size_t pos = 0; pos < text.size();) {
    int32_t found = -1;
    for (int32_t id : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if (!parse_special && types_[static_cast<size_t>(id)] == TokenType::kControl) continue;
      const std::string& t = tokens_[static_cast<size_t>(id)];
      if (text.compare(pos, t.size(), t) == 0) {
        found = id;
        break;
      }
    }
    if (found < 0) {
      ++pos;
      continue;
    }
    if (raw_begin < pos) out.push_back({text.substr(raw_begin, pos - raw_begin), -1, raw_begin});
    out.push_back({{}, found, pos});
    pos += tokens_[static_cast<size_t>(found)].size();
    raw_begin = pos;
  }
  if (raw_begin < text.size()) out.push_back({text.substr(raw_begin), -1, raw_begin});
  return out;
}

}  // namespace exactly
