#include "tokenizer/bpe_tokenizer.h"

#include <queue>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/unicode_nfc.h"

namespace exactly {

BpeTokenizer::BpeTokenizer(const TokenizerSpec& spec)
    : Tokenizer(spec),
      pre_(spec.pre),
      ignore_merges_(spec.ignore_merges.value_or(pre_.ignore_merges())),
      normalize_nfc_(spec.normalize_nfc),
      specials_(tokens_, types_) {
  raw_bytes_.reserve(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    // Control and user-defined tokens are stored as plain text; so is any
    // token that is not written with the byte mapping.
    const bool literal = types_[id] == TokenType::kControl || types_[id] == TokenType::kUserDefined;
    std::optional<std::string> bytes = literal ? std::nullopt : byte_unicode::to_bytes(tokens_[id]);
    raw_bytes_.push_back(bytes ? std::move(*bytes) : tokens_[id]);
  }
  for (int b = 0; b < 256; ++b) {
    const auto id = find_token(byte_unicode::char_for_byte(static_cast<uint8_t>(b)));
    byte_token_[static_cast<size_t>(b)] = id ? *id : -1;
  }
  merges_.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const std::string& m = spec.merges[rank];
    const size_t space = m.find(' ', 1);  // a leading space would be part of the left text
    if (space == std::string::npos) {
      throw FileFormatError(strformat("tokenizer.ggml.merges[%zu]: '%s' is not two token texts separated by a space",
                                      rank, m.c_str()));
    }
    const std::string_view left(m.data(), space), right(m.data() + space + 1, m.size() - space - 1);
    const auto l = find_token(left), r = find_token(right);
    const auto result = find_token(std::string(left) + std::string(right));
    if (!l || !r || !result) {
      throw FileFormatError(strformat("tokenizer.ggml.merges[%zu]: '%s' names a token that is not in the vocabulary",
                                      rank, m.c_str()));
    }
    // The first (lowest-rank) occurrence of a pair wins, as in the reference BPE.
    merges_.emplace(pair_key(*l, *r), Merge{static_cast<int32_t>(rank), *result});
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  auto encode_raw = [&](std::string_view raw) {
    std::string normalized;
    if (normalize_nfc_ && unicode::maybe_not_nfc(raw)) {
      normalized = unicode::nfc(raw);
      raw = normalized;
    }
    for (const PieceRange& p : pre_.split(raw)) encode_piece(raw.substr(p.begin, p.end - p.begin), out);
  };
  for (const TextFragment& f : specials_.split(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else {
      encode_raw(f.text);
    }
  }
  return out;
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  std::string key(piece);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  const auto whole = ignore_merges_ ? find_token(byte_unicode::from_bytes(piece)) : std::nullopt;
  if (whole) {
    ids.push_back(*whole);
  } else {
    ids = merge_piece(piece);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

std::vector<int32_t> BpeTokenizer::merge_piece(std::string_view piece) const {
  // Symbols form a doubly linked list over the piece; a min-heap holds
  // candidate merges ordered by (rank, position). Entries made stale by an
  // earlier merge are recognised and skipped when popped: O(n log n).
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // neighbour indices, -1 at the ends
  };
  struct Candidate {
    int32_t rank;
    int32_t left;           // symbol index
    int32_t left_id, right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (char c : piece) {
    const int32_t id = byte_token_[static_cast<uint8_t>(c)];
    if (id < 0) continue;  // a byte without a token cannot be represented; the reference drops it too
    const auto i = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, i - 1, -1});
    if (i > 0) symbols[static_cast<size_t>(i - 1)].next = i;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    if (l.next < 0) return;
    const int32_t right_id = symbols[static_cast<size_t>(l.next)].id;
    const auto it = merges_.find(pair_key(l.id, right_id));
    if (it != merges_.end()) heap.push({it->second.rank, left, l.id, right_id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = symbols[static_cast<size_t>(c.left)];
    if (l.id != c.left_id || l.next < 0) continue;  // the left symbol was merged away or changed
    Symbol& r = symbols[static_cast<size_t>(l.next)];
    if (r.id != c.right_id) continue;
    l.id = merges_.at(pair_key(c.left_id, c.right_id)).result;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = c.left;
    r.id = -1;  // dead
    consider(l.prev);
    consider(c.left);
  }
  std::vector<int32_t> ids;
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    ids.push_back(symbols[static_cast<size_t>(i)].id);
  }
  return ids;
}

std::string BpeTokenizer::token_bytes(int32_t id, bool render_special) const {
  EXACTLY_CHECK(id >= 0 && id < vocab_size(), "token id %d outside the vocabulary of %d", id, vocab_size());
  if (types_[static_cast<size_t>(id)] == TokenType::kControl && !render_special) return {};
  return raw_bytes_[static_cast<size_t>(id)];
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id, render_special);
  return out;
}

}  // namespace exactly
