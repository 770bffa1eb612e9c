// Byte-level BPE (tokenizer.ggml.model = "gpt2"): text is cut into pieces by
// the pre-tokenizer, each piece's bytes start as single-byte tokens and the
// adjacent pair with the lowest merge rank is merged until none is left.
#pragma once

#include <array>
#include <mutex>
#include <unordered_map>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace exactly {

class BpeTokenizer final : public Tokenizer {
 public:
  // Throws FileFormatError naming tokenizer.ggml.merges / .pre on bad values.
  explicit BpeTokenizer(const TokenizerSpec& spec);

  std::vector<int32_t> encode(std::string_view text, bool parse_special) const override;
  std::string token_bytes(int32_t id, bool render_special = false) const override;
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // id of the merged token
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }

  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  std::vector<int32_t> merge_piece(std::string_view piece) const;

  PreTokenizer pre_;
  bool ignore_merges_;
  bool normalize_nfc_;
  SpecialTokenSplitter specials_;
  std::vector<std::string> raw_bytes_;               // [vocab] bytes each token stands for
  std::array<int32_t, 256> byte_token_;              // [256] id of each single-byte token, -1 if absent
  std::unordered_map<uint64_t, Merge> merges_;       // (left id, right id) -> rank and result

  // Pieces repeat a lot in real text ("Ġthe"); remembering their tokens makes
  // encoding mostly hash lookups. Cleared when it grows past kMaxCacheEntries.
  static constexpr size_t kMaxCacheEntries = 1 << 16;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // piece bytes -> ids
};

}  // namespace exactly
