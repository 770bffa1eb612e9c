#include "tokenizer/wordpiece_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "core/format.h"
#include "tokenizer/utf8.h"
#include "tokenizer/wordpiece_normalizer.h"

namespace exactly {
namespace {

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

// The decoder's cleanup of one piece: spaces before punctuation and
// contractions removed, in the reference's order.
void cleanup(std::string& piece) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},     {" !", "!"},   {" ,", ","},   {" ' ", "'"},   {" n't", "n't"},
      {" 'm", "'m"},   {" do not", " don't"},          {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  };
  for (const auto& [from, to] : kRules) replace_all(piece, from, to);
}

}  // namespace

WordPieceTokenizer::WordPieceTokenizer(const TokenizerSpec& spec)
    : Tokenizer(spec), options_(spec.wordpiece), specials_(tokens_, types_) {
  vocab_.reserve(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (types_[id] == TokenType::kUnused) continue;
    vocab_[tokens_[id]] = static_cast<int32_t>(id);
    max_token_bytes_ = std::max(max_token_bytes_, tokens_[id].size());
  }
  const std::optional<int32_t> unk = spec.unk ? spec.unk : find_token("[UNK]");
  if (!unk) {
    throw FileFormatError("tokenizer.ggml.unknown_token_id: missing, and the vocabulary has no '[UNK]' token, "
                          "which a WordPiece vocabulary needs for words it cannot spell");
  }
  unk_ = *unk;
}

std::optional<int32_t> WordPieceTokenizer::lookup(std::string_view text) const {
  const auto it = vocab_.find(text);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

// Greedy longest match from the start, as the reference does it. No token is
// longer than max_token_bytes_, so no candidate longer is tried: each step
// costs at most that many lookups, whatever the word's length.
void WordPieceTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  size_t chars = 0;
  for (char c : word) chars += !is_continuation_byte(c);
  if (chars > options_.max_input_chars_per_word) {
    out.push_back(unk_);
    return;
  }
  const size_t first = out.size();
  std::string candidate;
  for (size_t start = 0; start < word.size();) {
    size_t end = std::min(word.size(), start + max_token_bytes_);
    while (end < word.size() && is_continuation_byte(word[end])) --end;
    std::optional<int32_t> id;
    while (end > start) {
      candidate = start > 0 ? options_.continuing_prefix : std::string();
      candidate.append(word.substr(start, end - start));
      if ((id = lookup(candidate))) break;
      do --end;
      while (end > start && is_continuation_byte(word[end]));
    }
    if (!id) {
      out.resize(first);
      out.push_back(unk_);
      return;
    }
    out.push_back(*id);
    start = end;
  }
}

std::vector<int32_t> WordPieceTokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  for (const TextFragment& f : specials_.split(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    for (const std::string& word : wordpiece_words(f.text, options_)) encode_word(word, out);
  }
  return out;
}

// The decoder's text for one token: after the first, a continuing token
// loses its prefix and any other gains a space before it.
std::string WordPieceTokenizer::piece(int32_t id, bool first) const {
  const std::string& text = token_text(id);
  std::string out;
  if (first) {
    out = text;
  } else if (text.starts_with(options_.continuing_prefix)) {
    out = text.substr(options_.continuing_prefix.size());
  } else {
    out = " " + text;
  }
  if (options_.cleanup) cleanup(out);
  return out;
}

std::string WordPieceTokenizer::token_bytes(int32_t id, bool render_special) const {
  if (token_type(id) == TokenType::kControl && !render_special) return {};
  return piece(id, false);
}

std::string WordPieceTokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (token_type(id) == TokenType::kControl && !render_special) continue;
    out += piece(id, first);
    first = false;
  }
  return out;
}

}  // namespace exactly
