#include "tokenizer/utf8.h"

#include <cstdint>

namespace exactly::utf8 {

Scan scan(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return {Status::kValid, 1};
  // Number of continuation bytes and the allowed range of the first one; the
  // narrowed ranges exclude overlongs (E0, F0), surrogates (ED) and > U+10FFFF (F4).
  size_t continuation = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    continuation = 1;
  } else if (b0 == 0xE0) {
    continuation = 2, lo = 0xA0;
  } else if (b0 == 0xED) {
    continuation = 2, hi = 0x9F;
  } else if (b0 >= 0xE1 && b0 <= 0xEF) {
    continuation = 2;
  } else if (b0 == 0xF0) {
    continuation = 3, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    continuation = 3;
  } else if (b0 == 0xF4) {
    continuation = 3, hi = 0x8F;
  } else {
    return {Status::kInvalid, 1};
  }
  size_t length = 1;
  for (size_t j = 0; j < continuation; ++j, ++length) {
    if (i + length >= s.size()) return {Status::kTruncated, length};
    const auto b = static_cast<uint8_t>(s[i + length]);
    const uint8_t first_lo = j == 0 ? lo : uint8_t{0x80};
    const uint8_t first_hi = j == 0 ? hi : uint8_t{0xBF};
    if (b < first_lo || b > first_hi) return {Status::kInvalid, length};
  }
  return {Status::kValid, length};
}

char32_t decode(std::string_view s, size_t i, size_t length) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (length == 1) return b0;
  static constexpr uint8_t kLeadMask[5] = {0, 0, 0x1F, 0x0F, 0x07};
  char32_t cp = b0 & kLeadMask[length];
  for (size_t j = 1; j < length; ++j) cp = (cp << 6) | (static_cast<uint8_t>(s[i + j]) & 0x3Fu);
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_whitespace(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace exactly::utf8
