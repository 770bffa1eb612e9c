// UTF-8 scanning that never trusts its input: the tokenizer and the streaming
// detokenizer both meet arbitrary bytes (a prompt file, a token that ends in
// the middle of a character), so every step reports how the bytes stand.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace exactly::utf8 {

enum class Status {
  kValid,      // a complete, well-formed character of `length` bytes
  kTruncated,  // the `length` bytes up to the end could still start a character
  kInvalid,    // `length` bytes (the maximal ill-formed subpart) can never be valid
};

struct Scan {
  Status status;
  size_t length;  // >= 1 whenever i < s.size()
};

// Classifies the bytes starting at s[i] (i < s.size()) following the
// well-formed sequences of Unicode Table 3-7 (no overlongs, no surrogates,
// nothing above U+10FFFF).
Scan scan(std::string_view s, size_t i);

// Code point of the well-formed sequence s[i, i + length).
char32_t decode(std::string_view s, size_t i, size_t length);

void append(std::string& out, char32_t cp);

// The Unicode White_Space property (what `\s` means in Unicode-aware regex engines).
bool is_whitespace(char32_t cp);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace exactly::utf8
