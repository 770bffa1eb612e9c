#include "tokenizer/wordpiece_normalizer.h"

#include <algorithm>

#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"
#include "tokenizer/wordpiece_unicode.h"

namespace exactly {
namespace {

using unicode::BertClass;

std::vector<char32_t> code_points(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const utf8::Scan sc = utf8::scan(text, i);
    out.push_back(sc.status == utf8::Status::kValid ? utf8::decode(text, i, sc.length) : U'\uFFFD');
    i += sc.length;
  }
  return out;
}

// The normalizer's steps in the reference's order: clean_text,
// handle_chinese_chars, strip_accents, lowercase, each over the whole text.
std::vector<char32_t> normalize(std::vector<char32_t> cps, const WordPieceOptions& o) {
  std::vector<char32_t> out;
  out.reserve(cps.size());
  for (char32_t cp : cps) {
    if (o.clean_text) {
      if (unicode::bert_class(cp) == BertClass::kControl) continue;
      if (utf8::is_whitespace(cp)) cp = U' ';
    }
    if (o.handle_chinese_chars && unicode::is_cjk(cp)) {
      out.insert(out.end(), {U' ', cp, U' '});
    } else {
      out.push_back(cp);
    }
  }
  if (o.strip_accents) {
    cps.clear();
    for (char32_t cp : out) unicode::append_bert_decomposition(cp, cps);
    unicode::canonical_order(cps);
    std::erase_if(cps, [](char32_t cp) { return unicode::bert_class(cp) == BertClass::kMark; });
    out.swap(cps);
  }
  if (o.lowercase) {
    cps.clear();
    for (char32_t cp : out) unicode::append_lowercase(cp, cps);
    out.swap(cps);
  }
  return out;
}

}  // namespace

std::vector<std::string> wordpiece_words(std::string_view text, const WordPieceOptions& options) {
  std::vector<std::string> words;
  std::string word;
  auto finish = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (char32_t cp : normalize(code_points(text), options)) {
    if (utf8::is_whitespace(cp)) {
      finish();
    } else if (unicode::bert_class(cp) == BertClass::kPunctuation) {
      finish();
      utf8::append(word, cp);
      finish();
    } else {
      utf8::append(word, cp);
    }
  }
  finish();
  return words;
}

}  // namespace exactly
