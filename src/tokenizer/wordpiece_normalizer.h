// The text side of a WordPiece vocabulary, as Hugging Face's BertNormalizer
// and BertPreTokenizer do it: control characters dropped, whitespace made
// spaces, CJK ideographs set apart, accents stripped, lowercased; then words
// split at whitespace, each punctuation character a word of its own.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace exactly {

// The words of one text between special tokens, in order, as UTF-8. Bytes
// that are not well-formed UTF-8 are read as U+FFFD (which clean_text drops).
std::vector<std::string> wordpiece_words(std::string_view text, const WordPieceOptions& options);

}  // namespace exactly
