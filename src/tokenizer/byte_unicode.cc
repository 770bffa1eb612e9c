#include "tokenizer/byte_unicode.h"

#include <array>

#include "tokenizer/utf8.h"

namespace exactly::byte_unicode {
namespace {

struct Tables {
  std::array<std::string, 256> char_of_byte;  // [256] UTF-8 text per byte
  std::array<int16_t, 512> byte_of_cp;        // [512] byte for code points < 512, -1 if unmapped
};

bool maps_to_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

const Tables& tables() {
  static const Tables t = [] {
    Tables r;
    r.byte_of_cp.fill(-1);
    char32_t next_shifted = 0x100;  // bytes that are not printable go to U+0100, U+0101, ... in byte order
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = maps_to_itself(b) ? static_cast<char32_t>(b) : next_shifted++;
      utf8::append(r.char_of_byte[static_cast<size_t>(b)], cp);
      r.byte_of_cp[cp] = static_cast<int16_t>(b);
    }
    return r;
  }();
  return t;
}

}  // namespace

const std::string& char_for_byte(uint8_t byte) { return tables().char_of_byte[byte]; }

std::optional<std::string> to_bytes(std::string_view token_text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(token_text.size());
  for (size_t i = 0; i < token_text.size();) {
    const utf8::Scan sc = utf8::scan(token_text, i);
    if (sc.status != utf8::Status::kValid) return std::nullopt;
    const char32_t cp = utf8::decode(token_text, i, sc.length);
    if (cp >= t.byte_of_cp.size() || t.byte_of_cp[cp] < 0) return std::nullopt;
    out += static_cast<char>(t.byte_of_cp[cp]);
    i += sc.length;
  }
  return out;
}

std::string from_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += char_for_byte(static_cast<uint8_t>(c));
  return out;
}

}  // namespace exactly::byte_unicode
