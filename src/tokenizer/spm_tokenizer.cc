#include "tokenizer/spm_tokenizer.h"

#include <queue>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"
#include "tokenizer/utf8.h"

namespace exactly {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Byte value of a "<0xNN>" token text.
std::optional<uint8_t> parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t hit = s.find(from, pos);
    out += s.substr(pos, hit == std::string_view::npos ? std::string_view::npos : hit - pos);
    if (hit == std::string_view::npos) return out;
    out += to;
    pos = hit + from.size();
  }
}

}  // namespace

SpmTokenizer::SpmTokenizer(const TokenizerSpec& spec)
    : Tokenizer(spec), specials_(tokens_, types_), scores_(spec.scores), unk_(spec.unk),
      add_space_prefix_(spec.add_space_prefix.value_or(true)),
      prefix_after_special_(spec.space_prefix_after_special),
      prefix_unless_space_(spec.space_prefix_unless_space) {
  if (scores_.empty()) scores_.assign(tokens_.size(), 0.0f);
  if (scores_.size() != tokens_.size()) {
    throw FileFormatError(strformat("tokenizer.ggml.scores: %zu entries for %zu tokens", scores_.size(), tokens_.size()));
  }
  byte_token_.fill(-1);
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const TokenType t = types_[id];
    if (t == TokenType::kByte) {
      const auto b = parse_byte_token(tokens_[id]);
      if (!b) throw FileFormatError(strformat("tokenizer.ggml.tokens[%zu]: byte token '%s' is not <0xNN>", id, tokens_[id].c_str()));
      byte_token_[*b] = static_cast<int32_t>(id);
    } else if (t == TokenType::kNormal || t == TokenType::kUserDefined) {
      // Control, unknown, unused and byte tokens are never the result of merging text.
      pieces_[tokens_[id]] = static_cast<int32_t>(id);
    }
  }
  if (!unk_) unk_ = find_token("<unk>");
  merge_rank_.reserve(spec.merges.size());
  for (size_t i = 0; i < spec.merges.size(); ++i) {
    const std::string& m = spec.merges[i];
    const size_t space = m.find(' ', 1);
    const bool known = space != std::string::npos && pieces_.count(std::string_view(m).substr(0, space)) &&
                       pieces_.count(std::string_view(m).substr(space + 1)) &&
                       piece_id(m.substr(0, space) + m.substr(space + 1));
    if (!known) {
      throw FileFormatError(strformat("tokenizer.ggml.merges[%zu]: '%s' is not two tokens whose concatenation is a token",
                                      i, m.c_str()));
    }
    merge_rank_.emplace(m, static_cast<int32_t>(i));  // the first (lowest) rank of a repeated merge wins
  }
}

std::optional<int32_t> SpmTokenizer::piece_id(std::string_view piece) const {
  const auto it = pieces_.find(piece);
  if (it == pieces_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  for (const TextFragment& f : specials_.split(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else {
      encode_fragment(f.text, f.offset == 0 || prefix_after_special_, out);
    }
  }
  return out;
}

void SpmTokenizer::encode_fragment(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  // The space prefix goes only before the start of the whole text, so that
  // decoding (which removes one leading space) gives the text back.
  const bool starts_with_space = text[0] == ' ' || text.substr(0, kSpaceMark.size()) == kSpaceMark;
  const bool prefix = add_space_prefix_ && at_start && !(prefix_unless_space_ && starts_with_space);
  std::string norm = (prefix ? std::string(kSpaceMark) : std::string()) + replace_all(text, " ", kSpaceMark);

  struct Symbol {
    size_t begin, length;  // bytes of norm
    int32_t prev, next;    // neighbour indices, -1 at the ends
  };
  struct Candidate {
    double score;     // the piece's score, or minus the merge's rank
    int32_t left;     // symbol index
    size_t length;    // bytes of the concatenation, to detect stale entries
    bool operator<(const Candidate& o) const {  // max-heap: highest score, then leftmost
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::vector<Symbol> symbols;
  for (size_t i = 0; i < norm.size();) {
    // One symbol per character; an invalid byte is a symbol of its own and
    // ends up as a byte token.
    const utf8::Scan sc = utf8::scan(norm, i);
    const size_t len = sc.status == utf8::Status::kValid ? sc.length : 1;
    const auto idx = static_cast<int32_t>(symbols.size());
    symbols.push_back({i, len, idx - 1, -1});
    if (idx > 0) symbols[static_cast<size_t>(idx - 1)].next = idx;
    i += len;
  }
  std::priority_queue<Candidate> heap;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    if (l.next < 0) return;
    const Symbol& r = symbols[static_cast<size_t>(l.next)];
    const std::string_view both = std::string_view(norm).substr(l.begin, l.length + r.length);
    if (!merge_rank_.empty()) {  // Hugging Face BPE: the pair must be a merge; the lowest rank goes first
      std::string pair(both.substr(0, l.length));
      pair += ' ';
      pair += both.substr(l.length);
      const auto it = merge_rank_.find(pair);
      if (it != merge_rank_.end()) heap.push({-static_cast<double>(it->second), left, both.size()});
      return;
    }
    const auto id = piece_id(both);
    if (id) heap.push({scores_[static_cast<size_t>(*id)], left, both.size()});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = symbols[static_cast<size_t>(c.left)];
    if (l.length == 0 || l.next < 0) continue;
    Symbol& r = symbols[static_cast<size_t>(l.next)];
    if (l.length + r.length != c.length) continue;  // a neighbour changed since this entry was made
    l.length += r.length;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = c.left;
    r.length = 0;  // dead
    consider(l.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    const std::string_view piece = std::string_view(norm).substr(s.begin, s.length);
    if (const auto id = piece_id(piece)) {
      out.push_back(*id);
      continue;
    }
    for (char c : piece) {
      const int32_t b = byte_token_[static_cast<uint8_t>(c)];
      if (b >= 0) {
        out.push_back(b);
      } else if (unk_) {
        out.push_back(*unk_);
      }
    }
  }
}

std::string SpmTokenizer::token_bytes(int32_t id, bool render_special) const {
  EXACTLY_CHECK(id >= 0 && id < vocab_size(), "token id %d outside the vocabulary of %d", id, vocab_size());
  const std::string& text = tokens_[static_cast<size_t>(id)];
  switch (types_[static_cast<size_t>(id)]) {
    case TokenType::kByte:
      return std::string(1, static_cast<char>(*parse_byte_token(text)));
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUnused:
      return render_special ? text : std::string();
    default:
      return replace_all(text, kSpaceMark, " ");
  }
}

std::string SpmTokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  bool first_text = true;  // the leading space added by encode sits on the first piece that renders
  for (int32_t id : ids) {
    std::string piece = token_bytes(id, render_special);
    if (piece.empty()) continue;
    if (first_text && add_space_prefix_ && piece[0] == ' ') piece.erase(0, 1);
    first_text = false;
    out += piece;
  }
  return out;
}

}  // namespace exactly
