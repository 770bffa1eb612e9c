// Pre-tokenizers of byte-level BPE vocabularies, chosen by tokenizer.ggml.pre:
// the text is cut into pieces by a sequence of regex stages before BPE merges
// run inside each piece (merges never cross a piece boundary).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

namespace re2 {
class RE2;
}

namespace exactly {

// Byte range [begin, end) of the text passed to PreTokenizer::split.
struct PieceRange {
  size_t begin;
  size_t end;
};

class PreTokenizer {
 public:
  // Throws FileFormatError naming tokenizer.ggml.pre for an unknown name.
  explicit PreTokenizer(std::string_view pre_name);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Pieces covering `text` in order, without gaps. Invalid UTF-8 bytes are
  // classified like U+FFFD (a symbol: neither letter, number nor space) and
  // stay inside the pieces, so no byte is ever lost.
  std::vector<PieceRange> split(std::string_view text) const;

  // Whether merging must be skipped when a whole piece is already a token
  // (Llama 3's tokenizer.json sets BPE "ignore_merges").
  bool ignore_merges() const { return ignore_merges_; }

  // Names accepted by the constructor, for error messages and tests.
  static std::vector<std::string_view> known_names();

 private:
  struct Stage;
  void split_stage(const Stage& stage, std::string_view text, size_t base,
                   std::vector<PieceRange>& out) const;

  std::vector<Stage> stages_;  // [num_stages] applied in order, each to every piece of the previous one
  bool ignore_merges_ = false;
};

}  // namespace exactly
