#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "tokenizer/utf8.h"

namespace exactly::unicode {

namespace {

struct CombiningClass {
  char32_t cp;
  uint8_t ccc;
};
struct Decomposition {
  char32_t cp;
  uint16_t first;
  uint8_t length;
};
struct Composition {
  char32_t first, second, composite;
};

#include "tokenizer/unicode_nfc_data.inc"

// Hangul syllables decompose and compose by arithmetic (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;  // nothing below U+0300 combines
  const auto* end = std::end(kCombiningClasses);
  const auto* it = std::lower_bound(std::begin(kCombiningClasses), end, cp,
                                    [](const CombiningClass& e, char32_t c) { return e.cp < c; });
  return it != end && it->cp == cp ? it->ccc : 0;
}

}  // namespace

void append_canonical_decomposition(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = std::end(kDecompositions);
  const auto* it = std::lower_bound(std::begin(kDecompositions), end, cp,
                                    [](const Decomposition& e, char32_t c) { return e.cp < c; });
  if (it == end || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), kDecompositionData + it->first, kDecompositionData + it->first + it->length);
}

void canonical_order(std::vector<char32_t>& d) {
  // Each run of non-starters sorted by combining class, stably (marks of one
  // class keep their order).
  for (size_t i = 0; i < d.size();) {
    if (combining_class(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && combining_class(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + static_cast<ptrdiff_t>(i), d.begin() + static_cast<ptrdiff_t>(j),
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }
}

namespace {

// The primary composite of (first, second), or 0.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount)
    return first + (second - kTBase);
  static const auto* table = [] {
    auto* t = new std::unordered_map<uint64_t, char32_t>();
    for (const Composition& c : kCompositions) t->emplace((uint64_t{c.first} << 21) | c.second, c.composite);
    return t;
  }();
  const auto it = table->find((uint64_t{first} << 21) | second);
  return it == table->end() ? 0 : it->second;
}

// Normalizes one run of well-formed code points in place.
void normalize_run(std::vector<char32_t>& cps) {
  std::vector<char32_t> d;
  d.reserve(cps.size());
  for (char32_t cp : cps) append_canonical_decomposition(cp, d);
  canonical_order(d);
  // Canonical composition: a character joins the last starter unless a
  // character between them is a starter or has a class >= its own.
  cps.clear();
  ptrdiff_t starter = -1;
  int between = -1;  // the highest class seen since the starter; -1: none
  for (char32_t c : d) {
    const int ccc = combining_class(c);
    if (starter >= 0 && (between == -1 || (between != 0 && between < ccc))) {
      if (const char32_t p = compose(cps[static_cast<size_t>(starter)], c)) {
        cps[static_cast<size_t>(starter)] = p;
        continue;
      }
    }
    if (ccc == 0) {
      starter = static_cast<ptrdiff_t>(cps.size());
      between = -1;
    } else {
      between = std::max(between, ccc);
    }
    cps.push_back(c);
  }
}

}  // namespace

bool maybe_not_nfc(std::string_view s) {
  // Every code point below U+0300 is its own NFC and combines with nothing
  // that precedes it; the first byte of anything from U+0300 up is >= 0xCC.
  for (unsigned char b : s)
    if (b >= 0xCC) return true;
  return false;
}

std::string nfc(std::string_view s) {
  if (!maybe_not_nfc(s)) return std::string(s);
  std::string out;
  out.reserve(s.size());
  std::vector<char32_t> run;
  auto flush = [&] {
    normalize_run(run);
    for (char32_t cp : run) utf8::append(out, cp);
    run.clear();
  };
  for (size_t i = 0; i < s.size();) {
    const utf8::Scan sc = utf8::scan(s, i);
    if (sc.status == utf8::Status::kValid) {
      run.push_back(utf8::decode(s, i, sc.length));
    } else {
      flush();
      out.append(s.substr(i, sc.length));
    }
    i += sc.length;
  }
  flush();
  return out;
}

}  // namespace exactly::unicode
