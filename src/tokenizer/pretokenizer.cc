#include "tokenizer/pretokenizer.h"

#include <re2/re2.h>

#include <string>

#include "core/check.h"
#include "core/error.h"
#include "tokenizer/pre_tokenizer_regexes.h"
#include "tokenizer/utf8.h"

namespace exactly {
namespace {

// One regex of a pre-tokenizer. Matches become pieces and so do the gaps
// between them (Hugging Face "Isolated" split behaviour).
//
// RE2 has no lookahead, so the alternatives `\s+(?!\S)|\s+` that end the
// GPT-2 family of patterns are left out of `pattern` and emulated when
// `whitespace_tail` is set: after every earlier alternative failed at a
// position, a run of N whitespace characters is one piece when it reaches the
// end of the text or N == 1, otherwise its first N-1 characters are (the last
// one is given back to the piece that follows, e.g. " word").
//
// `byte_digits` (Falcon's Digits step, which runs after its ByteLevel step)
// isolates runs of bytes whose byte-level characters are numeric: the ASCII
// digits and the bytes that map to superscripts and vulgar fractions, also
// inside multi-byte characters, as the reference does.
struct StageSpec {
  std::string_view pattern;
  bool whitespace_tail;
  bool byte_digits = false;
};

struct PreSpec {
  std::vector<std::string_view> names;
  std::vector<StageSpec> stages;
  bool ignore_merges;
};

// GPT-2 (Hugging Face ByteLevel pre-tokenizer regex):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+)";

// Llama 3 (tokenizer.json Split regex; contractions case-insensitive, numbers
// in groups of at most three digits, newlines kept with preceding spaces):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+)";

// Qwen2: the Llama 3 regex with single digits (\p{N} instead of \p{N}{1,3}).
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+)";

const std::vector<PreSpec>& pre_specs() {
  static const std::vector<PreSpec> specs = {
      // "gpt-2" is how llama.cpp's converter spells GPT-2's.
      {{"gpt2", "gpt-2", "mpt", "olmo"}, {{kGpt2, true}}, false},
      {{"llama-bpe", "llama3", "smaug-bpe", "dbrx"}, {{kLlama3, true}}, true},
      {{"qwen2"}, {{kQwen2, true}}, false},
      {{"gpt-4o"}, {{kGpt4o, true}}, false},
      {{"deepseek-llm"},
       {{kLineBreak, false}, {kDeepseekLetters, false}, {kDeepseekPunctuation, false}, {kTrailingSpaces, false},
        {kDeepseekCjk, false}, {R"(\p{N})", false}},
       false},
      {{"deepseek-coder"},
       {{kLineBreak, false}, {R"(\s?\p{L}+)", false}, {R"(\s?\p{P}+)", false}, {kDeepseekCjk, false},
        {R"(\p{N})", false}},
       false},
      {{"deepseek-v3"}, {{R"(\p{N}{1,3})", false}, {kDeepseekV3Kana, false}, {kDeepseekV3Words, true}}, false},
      // Falcon: runs of punctuation (Unicode's and ASCII's), GPT-2's regex, then
      // digit runs among the byte-level characters, then groups of three ASCII digits.
      {{"falcon"},
       {{R"([\p{P}\$\+<=>\^`\|~]+)", false}, {kGpt2, true}, {"", false, true}, {R"([0-9][0-9][0-9])", false}},
       false},
      // SmolLM2 / StarCoder tokenizer.json: Digits(individual_digits=True),
      // i.e. every \p{N} character isolated, then ByteLevel's GPT-2 regex.
      {{"smollm", "starcoder", "refact"}, {{R"(\p{N})", false}, {kGpt2, true}}, false},
      // GGUF files written without a known pre-tokenizer: punctuation runs,
      // then the GPT-2 regex (whose final `\s+` alternative is absent here,
      // which splits identically: a lone whitespace character before a
      // non-space becomes a gap piece of its own either way), then digit runs
      // and groups of three ASCII digits.
      {{"default"},
       {{R"([\p{P}\$\+<=>\^~\|]+)", false}, {kGpt2, true}, {R"(\p{N}+)", false}, {R"([0-9][0-9][0-9])", false}},
       false},
  };
  return specs;
}

// The Unicode White_Space set as the body of a character class; RE2's own `\s`
// is ASCII-only while the reference engines use the Unicode property.
constexpr std::string_view kWhitespaceClassBody =
    R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Rewrites `\s` into the Unicode whitespace class (bare or inside brackets).
std::string with_unicode_whitespace(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      if (pattern[i + 1] == 's') {
        out += in_class ? std::string(kWhitespaceClassBody) : "[" + std::string(kWhitespaceClassBody) + "]";
      } else {
        out += pattern.substr(i, 2);
      }
      ++i;
      continue;
    }
    if (c == '[') in_class = true;
    if (c == ']') in_class = false;
    out += c;
  }
  return out;
}

// A copy of `text` in which each invalid UTF-8 byte becomes 0x01 (a control
// character: like U+FFFD it is neither letter, number nor space), so the
// regexes see valid UTF-8 and piece boundaries stay at the same offsets.
std::string classification_copy(std::string_view text) {
  std::string out(text);
  for (size_t i = 0; i < out.size();) {
    const utf8::Scan sc = utf8::scan(out, i);
    if (sc.status == utf8::Status::kValid) {
      i += sc.length;
    } else {
      out[i] = '\x01';
      ++i;
    }
  }
  return out;
}

}  // namespace

struct PreTokenizer::Stage {
  std::unique_ptr<re2::RE2> regex;  // null for a byte_digits stage
  bool whitespace_tail;
};

PreTokenizer::PreTokenizer(std::string_view pre_name) {
  for (const PreSpec& spec : pre_specs()) {
    for (std::string_view name : spec.names) {
      if (name != pre_name) continue;
      for (const StageSpec& s : spec.stages) {
        if (s.byte_digits) {
          stages_.push_back({nullptr, false});
          continue;
        }
        re2::RE2::Options options;
        options.set_log_errors(false);
        const std::string pattern = with_unicode_whitespace(s.pattern);
        auto regex = std::make_unique<re2::RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
        EXACTLY_CHECK(regex->ok(), "pre-tokenizer regex %s: %s", pattern.c_str(), regex->error().c_str());
        stages_.push_back({std::move(regex), s.whitespace_tail});
      }
      ignore_merges_ = spec.ignore_merges;
      return;
    }
  }
  std::string known;
  for (std::string_view n : known_names()) known += (known.empty() ? "" : ", ") + std::string(n);
  throw FileFormatError(strformat("tokenizer.ggml.pre: unsupported pre-tokenizer '%.*s' (supported: %s)",
                                  static_cast<int>(pre_name.size()), pre_name.data(), known.c_str()));
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::known_names() {
  std::vector<std::string_view> names;
  for (const PreSpec& spec : pre_specs()) names.insert(names.end(), spec.names.begin(), spec.names.end());
  return names;
}

std::vector<PieceRange> PreTokenizer::split(std::string_view text) const {
  const std::string clean = classification_copy(text);
  std::vector<PieceRange> pieces;
  if (!clean.empty()) pieces.push_back({0, clean.size()});
  std::vector<PieceRange> next;
  for (const Stage& stage : stages_) {
    next.clear();
    for (const PieceRange& p : pieces) {
      split_stage(stage, std::string_view(clean).substr(p.begin, p.end - p.begin), p.begin, next);
    }
    pieces.swap(next);
  }
  return pieces;
}

namespace {

// Whether byte b's byte-level character (GPT-2's byte alphabet) is numeric.
bool numeric_byte(unsigned char b) {
  return (b >= '0' && b <= '9') || b == 0xB2 || b == 0xB3 || b == 0xB9 || (b >= 0xBC && b <= 0xBE);
}

// Runs of numeric bytes are pieces, and so are the gaps between them.
void split_byte_digits(std::string_view text, size_t base, std::vector<PieceRange>& out) {
  size_t start = 0;
  while (start < text.size()) {
    const bool digit = numeric_byte(static_cast<unsigned char>(text[start]));
    size_t end = start + 1;
    while (end < text.size() && numeric_byte(static_cast<unsigned char>(text[end])) == digit) ++end;
    out.push_back({base + start, base + end});
    start = end;
  }
}

}  // namespace

void PreTokenizer::split_stage(const Stage& stage, std::string_view text, size_t base,
                               std::vector<PieceRange>& out) const {
  if (stage.regex == nullptr) return split_byte_digits(text, base, out);
  const re2::StringPiece whole(text.data(), text.size());
  const size_t n = text.size();
  size_t gap_begin = n;  // start of the pending unmatched run; n when none
  auto emit = [&](size_t begin, size_t end) {
    if (gap_begin < begin) out.push_back({base + gap_begin, base + begin});
    gap_begin = n;
    out.push_back({base + begin, base + end});
  };
  re2::StringPiece match;
  size_t pos = 0;
  while (pos < n) {
    if (!stage.whitespace_tail) {
      // No emulated alternative: the leftmost match is the next piece.
      if (!stage.regex->Match(whole, pos, n, re2::RE2::UNANCHORED, &match, 1)) break;
      const auto begin = static_cast<size_t>(match.data() - text.data());
      const size_t end = begin + match.size();
      if (end == begin) {  // an empty match adds nothing; step over one character
        if (gap_begin == n) gap_begin = pos;
        pos = begin + utf8::scan(text, begin).length;
        continue;
      }
      if (gap_begin == n && begin > pos) gap_begin = pos;
      emit(begin, end);
      pos = end;
      continue;
    }
    // Alternatives before the whitespace tail win when they match here.
    if (stage.regex->Match(whole, pos, n, re2::RE2::ANCHOR_START, &match, 1) && !match.empty()) {
      emit(pos, pos + match.size());
      pos += match.size();
      continue;
    }
    const size_t len = utf8::scan(text, pos).length;
    if (!utf8::is_whitespace(utf8::decode(text, pos, len))) {
      if (gap_begin == n) gap_begin = pos;
      pos += len;
      continue;
    }
    size_t run_end = pos, last_start = pos, count = 0;
    while (run_end < n) {
      const size_t l = utf8::scan(text, run_end).length;
      if (!utf8::is_whitespace(utf8::decode(text, run_end, l))) break;
      last_start = run_end;
      run_end += l;
      ++count;
    }
    const size_t end = (run_end == n || count == 1) ? run_end : last_start;
    emit(pos, end);
    pos = end;
  }
  if (gap_begin == n && pos < n) gap_begin = pos;
  if (gap_begin < n) out.push_back({base + gap_begin, base + n});
}

}  // namespace exactly
