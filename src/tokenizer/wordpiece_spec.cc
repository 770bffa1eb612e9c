#include "tokenizer/wordpiece_spec.h"

#include "core/error.h"
#include "core/format.h"
#include "tokenizer/utf8.h"
#include "tokenizer/wordpiece_unicode.h"

namespace exactly {
namespace {

using nlohmann::json;

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581, the converter's mark of a word's first token

void read_normalizer(const JsonObject& root, WordPieceOptions& o) {
  const json* v = root.find("normalizer");
  if (!v) {
    o.clean_text = o.handle_chinese_chars = o.strip_accents = o.lowercase = false;
    return;
  }
  const JsonObject norm(root.path(), *v, "normalizer");
  const std::string type = norm.require_string("type");
  if (type != "BertNormalizer") {
    norm.fail("type", strformat("is the normalizer '%s'; a WordPiece tokenizer needs BertNormalizer or none",
                                type.c_str()));
  }
  o.clean_text = norm.get_bool("clean_text").value_or(true);
  o.handle_chinese_chars = norm.get_bool("handle_chinese_chars").value_or(true);
  o.lowercase = norm.get_bool("lowercase").value_or(true);
  o.strip_accents = norm.get_bool("strip_accents").value_or(o.lowercase);  // null: as lowercase
}

void read_decoder(const JsonObject& root, WordPieceOptions& o) {
  const json* v = root.find("decoder");
  if (!v) root.fail("decoder", "is missing; a WordPiece tokenizer needs the WordPiece decoder");
  const JsonObject dec(root.path(), *v, "decoder");
  const std::string type = dec.require_string("type");
  if (type != "WordPiece") {
    dec.fail("type", strformat("is the decoder '%s'; a WordPiece tokenizer needs the WordPiece decoder", type.c_str()));
  }
  if (dec.get_string("prefix").value_or("##") != o.continuing_prefix) {
    dec.fail("prefix", strformat("differs from the model's continuing_subword_prefix '%s'",
                                 o.continuing_prefix.c_str()));
  }
  o.cleanup = dec.get_bool("cleanup").value_or(true);
}

bool is_bracketed(std::string_view t) { return t.size() >= 2 && t.front() == '[' && t.back() == ']'; }

bool changes_when_lowercased(std::string_view text) {
  std::vector<char32_t> lower;
  for (size_t i = 0; i < text.size();) {
    const utf8::Scan sc = utf8::scan(text, i);
    if (sc.status == utf8::Status::kValid) {
      const char32_t cp = utf8::decode(text, i, sc.length);
      lower.clear();
      unicode::append_lowercase(cp, lower);
      if (lower.size() != 1 || lower[0] != cp) return true;
    }
    i += sc.length;
  }
  return false;
}

}  // namespace

void read_wordpiece_json(const JsonObject& root, const JsonObject& model, TokenizerSpec& spec) {
  spec.model = "bert";
  WordPieceOptions& o = spec.wordpiece;
  o.continuing_prefix = model.get_string("continuing_subword_prefix").value_or("##");
  const int64_t max_chars = model.get_int("max_input_chars_per_word").value_or(100);
  if (max_chars < 0) model.fail("max_input_chars_per_word", "is negative");
  o.max_input_chars_per_word = static_cast<size_t>(max_chars);
  const std::string unk = model.get_string("unk_token").value_or("[UNK]");
  for (size_t i = 0; i < spec.tokens.size() && !spec.unk; ++i) {
    if (spec.tokens[i] == unk) spec.unk = static_cast<int32_t>(i);
  }
  if (!spec.unk) {
    model.fail("unk_token", strformat("is '%s', which is not in the vocabulary; a WordPiece tokenizer needs it for "
                                      "words it cannot spell",
                                      unk.c_str()));
  }
  read_normalizer(root, o);
  const json* pre = root.find("pre_tokenizer");
  const std::string pre_type = pre ? JsonObject(root.path(), *pre, "pre_tokenizer").require_string("type") : "";
  if (pre_type != "BertPreTokenizer") {
    const std::string what = pre_type.empty() ? std::string("missing") : "'" + pre_type + "'";
    root.fail("pre_tokenizer", strformat("is %s; a WordPiece tokenizer needs BertPreTokenizer", what.c_str()));
  }
  read_decoder(root, o);
}

void read_wordpiece_gguf(TokenizerSpec& spec) {
  bool cased = false;
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    std::string& t = spec.tokens[i];
    if (is_bracketed(t)) continue;
    if (t.starts_with(kWordStart)) {
      t.erase(0, kWordStart.size());
    } else {
      t.insert(0, spec.wordpiece.continuing_prefix);
    }
    const TokenType type = spec.types.empty() ? TokenType::kNormal : spec.types[i];
    if (type != TokenType::kControl && type != TokenType::kUnused && !cased) cased = changes_when_lowercased(t);
  }
  spec.wordpiece.lowercase = spec.wordpiece.strip_accents = !cased;
}

}  // namespace exactly
