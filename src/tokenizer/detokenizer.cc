#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace exactly {
namespace {

// Moves the complete characters at the front of `pending` to the result,
// replacing each maximal ill-formed subpart by U+FFFD. A truncated sequence at
// the end stays pending unless `at_end`, when it can no longer complete.
std::string take_complete(std::string& pending, bool at_end) {
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    const utf8::Scan sc = utf8::scan(pending, i);
    if (sc.status == utf8::Status::kTruncated && !at_end) break;
    if (sc.status == utf8::Status::kValid) {
      out.append(pending, i, sc.length);
    } else {
      out += utf8::kReplacementChar;
    }
    i += sc.length;
  }
  pending.erase(0, i);
  return out;
}

}  // namespace

std::string StreamingDetokenizer::push(int32_t id) {
  if (first_) {
    // decode() of the first text-bearing token drops the space a
    // SentencePiece encoder put before the text; later tokens keep theirs.
    const std::string piece = tok_.decode(std::span<const int32_t>(&id, 1), render_special_);
    if (!piece.empty()) first_ = false;
    pending_ += piece;
  } else {
    pending_ += tok_.token_bytes(id, render_special_);
  }
  return take_complete(pending_, false);
}

std::string StreamingDetokenizer::flush() { return take_complete(pending_, true); }

}  // namespace exactly
