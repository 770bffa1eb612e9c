#include "tokenizer/wordpiece_unicode.h"

#include <algorithm>
#include <iterator>

#include "tokenizer/unicode_nfc.h"

namespace exactly::unicode {
namespace {

struct ClassRange {
  char32_t first, last;
  BertClass cls;
};
struct Lowercase {
  char32_t cp, first, second;  // second: 0 when the lowercase is one code point
};
struct CodeRange {
  char32_t first, last;
};
constexpr BertClass kControl = BertClass::kControl, kPunctuation = BertClass::kPunctuation, kMark = BertClass::kMark;

#include "tokenizer/wordpiece_unicode_data.inc"

}  // namespace

BertClass bert_class(char32_t cp) {
  const auto* end = std::end(kClassRanges);
  const auto* it = std::upper_bound(std::begin(kClassRanges), end, cp,
                                    [](char32_t c, const ClassRange& r) { return c < r.first; });
  if (it == std::begin(kClassRanges)) return BertClass::kOther;
  --it;
  return cp <= it->last ? it->cls : BertClass::kOther;
}

bool is_cjk(char32_t cp) {
  return std::any_of(std::begin(kCjkRanges), std::end(kCjkRanges),
                     [cp](const CodeRange& r) { return cp >= r.first && cp <= r.last; });
}

void append_lowercase(char32_t cp, std::vector<char32_t>& out) {
  if (cp < 0x80) {
    out.push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  const auto* end = std::end(kLowercase);
  const auto* it = std::lower_bound(std::begin(kLowercase), end, cp,
                                    [](const Lowercase& e, char32_t c) { return e.cp < c; });
  if (it == end || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  out.push_back(it->first);
  if (it->second != 0) out.push_back(it->second);
}

void append_bert_decomposition(char32_t cp, std::vector<char32_t>& out) {
  if (std::find(std::begin(kUndecomposed), std::end(kUndecomposed), cp) != std::end(kUndecomposed)) {
    out.push_back(cp);
    return;
  }
  append_canonical_decomposition(cp, out);
}

}  // namespace exactly::unicode
