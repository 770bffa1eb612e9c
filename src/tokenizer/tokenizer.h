// Text <-> token ids for the vocabularies stored in GGUF metadata:
// byte-level BPE (tokenizer.ggml.model = "gpt2") with the pre-tokenizer chosen
// by tokenizer.ggml.pre, and SentencePiece-style vocabularies ("llama"); and
// for the byte-level and SentencePiece-style BPE of a Hugging Face tokenizer.json;
// and WordPiece vocabularies ("bert" in GGUF, WordPiece in a tokenizer.json).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace exactly {

class GGUFFile;

enum class TokenType : int32_t {  // tokenizer.ggml.token_type values
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

// How a WordPiece vocabulary ("bert") normalizes, splits and decodes text:
// the options of Hugging Face's BertNormalizer, WordPiece model and decoder.
struct WordPieceOptions {
  bool clean_text = true;            // drop control characters, whitespace as " "
  bool handle_chinese_chars = true;  // each CJK ideograph a word of its own
  bool strip_accents = true;         // NFD, then drop nonspacing marks
  bool lowercase = true;
  std::string continuing_prefix = "##";  // marks a token that continues a word
  size_t max_input_chars_per_word = 100; // longer words become the unknown token
  bool cleanup = true;               // the decoder joins " ." into "." and the like
};

// The tokenizer.ggml.* metadata as plain values, so a tokenizer can be built
// without a GGUF file (tests build small vocabularies this way).
struct TokenizerSpec {
  std::string model;                // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece), "bert" (WordPiece)
  std::string pre = "default";      // tokenizer.ggml.pre (byte-level BPE only)
  std::vector<std::string> tokens;  // [vocab] token texts
  std::vector<TokenType> types;     // [vocab], or empty for all kNormal
  std::vector<float> scores;        // [vocab] SentencePiece merge priorities, or empty
  // [num_merges] "left right" token texts; rank = index. For "llama" (only
  // from a tokenizer.json's SentencePiece-style BPE): when present, only these
  // pairs merge, lowest rank first, as Hugging Face's BPE does; the scores are
  // then not used for merging.
  std::vector<std::string> merges;
  std::optional<int32_t> bos, eos, eot, eom, unk;
  // Unset means the model's default: add_bos true for "llama", add_space_prefix
  // true for "llama", everything else false.
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  // "llama" from a tokenizer.json: where the space prefix goes besides the
  // start of the text. after_special: also before text that follows a special
  // token (the Prepend normalizer, Metaspace "always"); unless_space: not
  // before text that already starts with a space or "▁" (Metaspace).
  bool space_prefix_after_special = false, space_prefix_unless_space = false;
  // Byte-level BPE: take a piece whole when it is a token, without merging.
  // Unset means what the pre-tokenizer's family does (Llama 3: true); a
  // tokenizer.json says it explicitly (model.ignore_merges).
  std::optional<bool> ignore_merges;
  // Byte-level BPE from a tokenizer.json with the NFC normalizer (Qwen2):
  // each text between special tokens is put in Unicode Normalization Form C
  // before it is split.
  bool normalize_nfc = false;
  // "bert": tokens as a tokenizer.json has them (a continuing token starts
  // with continuing_prefix; a GGUF's word-initial marker is already removed).
  WordPieceOptions wordpiece;
  std::string chat_template;
};

class Tokenizer {
 public:
  // Builds a tokenizer from plain values. Throws FileFormatError naming the
  // tokenizer.ggml.* key whose value is missing or inconsistent.
  static std::unique_ptr<Tokenizer> create(const TokenizerSpec& spec);
  // Reads the spec from the file's tokenizer.ggml.* keys.
  static TokenizerSpec spec_from_gguf(const GGUFFile& file);

  // Builds the tokenizer described by the file's tokenizer.ggml.* keys.
  // Throws FileFormatError naming the key when they are missing or inconsistent.
  static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile& file);

  // Reads the spec of a Hugging Face checkpoint directory: tokenizer.json
  // (byte-level BPE, or SentencePiece-style BPE with byte_fallback as
  // "llama") and, when present, tokenizer_config.json (chat
  // template, BOS/EOS) or chat_template.jinja. Throws FileFormatError naming
  // the file and key of anything missing, inconsistent or unsupported.
  static TokenizerSpec spec_from_hf(const std::string& dir);
  static std::unique_ptr<Tokenizer> from_hf(const std::string& dir);
  virtual ~Tokenizer() = default;

  // Token ids for `text`, without BOS/EOS. With parse_special, the text of a
  // control or user-defined token (e.g. "<|im_end|>") becomes that token;
  // without it, such text is tokenized as ordinary characters.
  // `text` need not be UTF-8: an invalid byte is pre-tokenized like a symbol
  // character and encoded as its own byte (byte-level BPE) or <0xNN> token
  // (SentencePiece), so decode(encode(s)) == s. The only bytes lost are those
  // a byte-level vocabulary has no token for at all (SmolLM2 lacks 0xC0,
  // 0xF5..0xFF and a few control bytes); like the reference BPE, they are dropped.
  virtual std::vector<int32_t> encode(std::string_view text, bool parse_special) const = 0;

  // The raw bytes a token stands for (byte-level BPE and <0xNN> byte tokens
  // mapped back to bytes). Control tokens give their text only when render_special.
  virtual std::string token_bytes(int32_t id, bool render_special = false) const = 0;

  // Concatenated bytes of the tokens; for SentencePiece, the leading space
  // added at encode time is removed. May end in an incomplete UTF-8 sequence.
  virtual std::string decode(std::span<const int32_t> ids, bool render_special = false) const = 0;

  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& token_text(int32_t id) const { return tokens_.at(static_cast<size_t>(id)); }
  TokenType token_type(int32_t id) const { return types_.at(static_cast<size_t>(id)); }
  std::optional<int32_t> find_token(std::string_view text) const;

  std::optional<int32_t> bos_id() const { return bos_; }
  std::optional<int32_t> eos_id() const { return eos_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  // Whether generation should stop at this token (EOS, EOT, <|im_end|>, <|eot_id|>, ...).
  bool is_end_of_generation(int32_t id) const;
  const std::string& chat_template() const { return chat_template_; }
  // Replaces the template the model came with (--chat-template).
  void set_chat_template(std::string text) { chat_template_ = std::move(text); }

 protected:
  // Validates the shared parts of the spec and fills the members below.
  explicit Tokenizer(const TokenizerSpec& spec);

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::optional<int32_t> bos_, eos_;
  bool add_bos_ = false, add_eos_ = false;
  std::vector<int32_t> end_of_generation_;
  std::string chat_template_;
  std::unordered_map<std::string, int32_t> token_ids_;  // text -> id (the last id for duplicate texts)
};

// Turns a stream of token ids into text without ever emitting a partial UTF-8
// sequence: bytes of an incomplete character are held until it completes.
// Invalid sequences are emitted as U+FFFD once they can no longer complete.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tok, bool render_special = false)
      : tok_(tok), render_special_(render_special) {}
  std::string push(int32_t id);  // text that became complete with this token
  std::string flush();           // whatever is left, invalid bytes replaced

 private:
  const Tokenizer& tok_;
  bool render_special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace exactly
