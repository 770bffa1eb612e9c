// Unicode Normalization Form C (UAX #15): canonical decomposition, canonical
// ordering of combining marks, then canonical composition. Qwen2's
// tokenizer.json normalizes every text this way before pre-tokenizing, so a
// decomposed "é" (e + U+0301) must become the same tokens as a composed one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace exactly::unicode {

// The NFC form of UTF-8 text. Bytes that are not well-formed UTF-8 are kept
// as they are and end the normalization run they interrupt (nothing composes
// across them).
std::string nfc(std::string_view utf8);

// Whether nfc(utf8) would return utf8 unchanged, checked cheaply for the
// common case of text without combining marks or decomposable characters.
bool maybe_not_nfc(std::string_view utf8);

// The two steps of NFD, for normalizers that decompose (WordPiece's strip_accents):
// appends the full canonical decomposition of `cp` ...
void append_canonical_decomposition(char32_t cp, std::vector<char32_t>& out);
// ... and sorts each run of non-starters by combining class, stably.
void canonical_order(std::vector<char32_t>& cps);

}  // namespace exactly::unicode
