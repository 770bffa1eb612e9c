// The GPT-2 byte <-> unicode mapping of byte-level BPE vocabularies: every
// byte is stored in token texts as one printable character (the byte itself
// for visible Latin-1, U+0100 + n for the others), so " the" is "Ġthe".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace exactly::byte_unicode {

// UTF-8 text of the character that stands for `byte`.
const std::string& char_for_byte(uint8_t byte);

// Raw bytes of a token text written with the mapping, or nullopt when the
// text contains a character outside it (e.g. an added token in plain UTF-8).
std::optional<std::string> to_bytes(std::string_view token_text);

// The mapped text of raw bytes (the inverse of to_bytes).
std::string from_bytes(std::string_view bytes);

}  // namespace exactly::byte_unicode
