// Reading TokenizerSpec from a Hugging Face checkpoint: tokenizer.json holds
// the vocabulary, merges, added tokens and pre-tokenizer (byte-level BPE as
// "gpt2", SentencePiece-style BPE with byte_fallback as "llama", WordPiece as
// "bert"); tokenizer_config.json
// the chat template and the BOS/EOS texts.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/format.h"
#include "loader/json_file.h"
#include "tokenizer/hf_pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/wordpiece_spec.h"

namespace exactly {
namespace {

using nlohmann::json;

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Options of the BPE model that would change the ids. Returns whether it is
// SentencePiece-style (byte_fallback: characters the vocabulary lacks become
// <0xNN> tokens) rather than byte-level.
bool check_bpe_model(const JsonObject& model) {
  const std::string type = model.require_string("type");
  if (type != "BPE") {
    model.fail("type", strformat("is '%s'; only BPE tokenizers (byte-level, or SentencePiece-style with "
                                 "byte_fallback) are supported",
                                 type.c_str()));
  }
  const bool byte_fallback = model.get_bool("byte_fallback").value_or(false);
  if (!model.get_string("continuing_subword_prefix").value_or("").empty()) {
    model.fail("continuing_subword_prefix", "is set, which is not supported");
  }
  if (!model.get_string("end_of_word_suffix").value_or("").empty()) {
    model.fail("end_of_word_suffix", "is set, which is not supported");
  }
  if (model.get_number("dropout").value_or(0.0) != 0.0) model.fail("dropout", "is set; encoding must be deterministic");
  if (byte_fallback && model.get_bool("ignore_merges").value_or(false)) {
    model.fail("ignore_merges", "is true with byte_fallback, which is not supported");
  }
  return byte_fallback;
}

// The steps of a normalizer or pre-tokenizer: a Sequence's list, a single
// step, or none (absent or null).
std::vector<JsonObject> steps(const JsonObject& root, std::string_view key, const char* list_key) {
  const json* v = root.find(key);
  if (!v || v->is_null()) return {};
  JsonObject step(root.path(), *v, std::string(key));
  if (step.require_string("type") != "Sequence") return {step};
  const json& list = step.require(list_key);
  if (!list.is_array()) step.fail(list_key, "must be a list");
  std::vector<JsonObject> out;
  for (size_t i = 0; i < list.size(); ++i) {
    out.emplace_back(root.path(), list[i], step.key_path(strformat("%s[%zu]", list_key, i)));
  }
  return out;
}

// Where a SentencePiece-style tokenizer.json puts "▁": either the normalizer
// Sequence[Prepend("▁"), Replace(" ", "▁")] with no pre-tokenizer (Llama 2,
// Mistral 7B v0.1: every piece of text between special tokens gets the
// prefix), or a Metaspace pre-tokenizer without splitting (newer files; its
// prepend_scheme says where the prefix goes, and text that starts with a space
// or "▁" gets none).
void read_space_handling(const JsonObject& root, TokenizerSpec& spec) {
  const std::vector<JsonObject> norm = steps(root, "normalizer", "normalizers");
  const std::vector<JsonObject> pre = steps(root, "pre_tokenizer", "pretokenizers");
  if (!norm.empty() && pre.empty()) {
    size_t i = 0;
    spec.add_space_prefix = false;
    if (norm[0].require_string("type") == "Prepend") {
      if (norm[0].require_string("prepend") != kSpaceMark) norm[0].fail("prepend", "must be \"\u2581\"");
      spec.add_space_prefix = true;
      i = 1;
    }
    if (norm.size() != i + 1 || norm[i].require_string("type") != "Replace") {
      const JsonObject& bad = norm[std::min(i, norm.size() - 1)];
      bad.fail("type", strformat("is the normalizer '%s'; a SentencePiece-style tokenizer must normalize by "
                                 "[Prepend(\"\u2581\"),] Replace(\" \", \"\u2581\") and nothing else",
                                 bad.require_string("type").c_str()));
    }
    const JsonObject& rep = norm[i];
    if (rep.object("pattern").get_string("String") != " " || rep.require_string("content") != kSpaceMark) {
      rep.fail("pattern", "must replace {\"String\": \" \"} by \"\u2581\"");
    }
    spec.space_prefix_after_special = true;  // normalizers run on each text between special tokens
    return;
  }
  if (norm.empty() && pre.size() == 1 && pre[0].require_string("type") == "Metaspace") {
    const JsonObject& meta = pre[0];
    if (meta.require_string("replacement") != kSpaceMark) meta.fail("replacement", "must be \"\u2581\"");
    if (meta.get_bool("split").value_or(true)) {
      meta.fail("split", "is true (or missing): splitting into words at \"\u2581\" is not supported");
    }
    std::string scheme = meta.get_string("prepend_scheme").value_or("");
    if (scheme.empty()) scheme = meta.get_bool("add_prefix_space").value_or(true) ? "always" : "never";
    if (scheme != "first" && scheme != "always" && scheme != "never") {
      meta.fail("prepend_scheme", strformat("is '%s', not first, always or never", scheme.c_str()));
    }
    spec.add_space_prefix = scheme != "never";
    spec.space_prefix_after_special = scheme == "always";
    spec.space_prefix_unless_space = true;
    return;
  }
  auto describe = [](const std::vector<JsonObject>& list) {
    std::string out;
    for (const JsonObject& o : list) out += (out.empty() ? "" : ", ") + o.require_string("type");
    return out.empty() ? std::string("none") : out;
  };
  root.fail("pre_tokenizer",
            strformat("is %s with the normalizer %s; a SentencePiece-style (byte_fallback) BPE needs the "
                      "normalizer [Prepend(\"\u2581\"),] Replace(\" \", \"\u2581\") and no pre-tokenizer, or a "
                      "Metaspace pre-tokenizer and no normalizer",
                      describe(pre).c_str(), describe(norm).c_str()));
}

int32_t token_id(const JsonObject& obj, std::string_view key, const json& v) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= (int64_t{1} << 30)) {
    obj.fail(key, strformat("has the invalid token id %s", v.dump().c_str()));
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

// model.vocab and added_tokens into spec.tokens / spec.types. Added tokens
// (Llama 3's and Qwen2's special tokens) may lie past model.vocab.
void read_vocab(const JsonObject& root, const JsonObject& model, TokenizerSpec& spec) {
  std::vector<std::optional<std::string>> texts;  // [vocab]
  auto place = [&](const JsonObject& where, std::string_view key, int32_t id, const std::string& text) {
    if (static_cast<size_t>(id) >= texts.size()) texts.resize(static_cast<size_t>(id) + 1);
    auto& slot = texts[static_cast<size_t>(id)];
    if (slot && *slot != text) {
      where.fail(key, strformat("gives id %d to '%s', which already belongs to '%s'", id, text.c_str(), slot->c_str()));
    }
    slot = text;
  };
  const JsonObject vocab = model.object("vocab");
  for (const auto& [text, id] : vocab.value().items()) place(vocab, text, token_id(vocab, text, id), text);
  spec.types.assign(texts.size(), TokenType::kNormal);

  if (const json* added = root.find("added_tokens")) {
    if (!added->is_array()) root.fail("added_tokens", "must be a list");
    for (size_t i = 0; i < added->size(); ++i) {
      const JsonObject t(root.path(), (*added)[i], strformat("added_tokens[%zu]", i));
      for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
        if (t.get_bool(flag).value_or(false)) t.fail(flag, "is true, which is not supported");
      }
      const int32_t id = token_id(t, "id", t.require("id"));
      place(t, "id", id, t.require_string("content"));
      if (spec.types.size() < texts.size()) spec.types.resize(texts.size(), TokenType::kNormal);
      // Special tokens are control tokens (not rendered by default); the
      // others are matched in the text the same way but rendered as text.
      spec.types[static_cast<size_t>(id)] =
          t.get_bool("special").value_or(false) ? TokenType::kControl : TokenType::kUserDefined;
    }
  }
  spec.tokens.reserve(texts.size());
  for (size_t id = 0; id < texts.size(); ++id) {
    if (!texts[id]) model.fail("vocab", strformat("has no token with id %zu (nor has added_tokens)", id));
    spec.tokens.push_back(std::move(*texts[id]));
  }
}

// Merges as "left right" strings (tokenizers < 0.20) or [left, right] pairs.
std::vector<std::string> read_merges(const JsonObject& model) {
  const json& merges = model.require("merges");
  if (!merges.is_array()) model.fail("merges", "must be a list");
  std::vector<std::string> out;
  out.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string key = strformat("merges[%zu]", i);
    if (m.is_string()) {
      out.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      const std::string left = m[0].get<std::string>(), right = m[1].get<std::string>();
      // A space would be ambiguous in the "left right" form the tokenizer reads.
      if (left.find(' ') != std::string::npos || right.find(' ') != std::string::npos) {
        model.fail(key, "has a token containing a space, which the \"left right\" form cannot express");
      }
      out.push_back(left + " " + right);
    } else {
      model.fail(key, strformat("must be \"left right\" or [left, right], not %s", m.dump().c_str()));
    }
  }
  return out;
}

std::optional<int32_t> find_id(const TokenizerSpec& spec, const std::string& text) {
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    if (spec.tokens[i] == text) return static_cast<int32_t>(i);
  }
  return std::nullopt;
}

// Token types and scores of a SentencePiece-style vocabulary, and its unk.
// <0xNN> tokens of model.vocab are byte tokens (all 256 must be there, as
// byte_fallback needs them); the unk token is kUnknown unless it is an added
// special token (then it stays a control token, so its text is matched in the
// input as Hugging Face does). The scores rank tokens by the first merge that
// makes them: score = -rank, and -num_merges for tokens no merge makes. The
// tokenizer itself merges by spec.merges (only listed pairs merge, lowest rank
// first); the scores give the same order to anything that merges by score.
void spm_types_and_scores(const JsonObject& model, TokenizerSpec& spec) {
  const JsonObject vocab = model.object("vocab");
  std::vector<bool> seen(256, false);
  for (const auto& [text, id_json] : vocab.value().items()) {
    const size_t id = static_cast<size_t>(id_json.get<int64_t>());
    unsigned byte = 0;
    char tail = 0;
    if (text.size() == 6 && std::sscanf(text.c_str(), "<0x%2X%c", &byte, &tail) == 2 && tail == '>' &&
        std::isxdigit(static_cast<unsigned char>(text[3])) && std::isxdigit(static_cast<unsigned char>(text[4])) &&
        spec.types[id] == TokenType::kNormal) {
      spec.types[id] = TokenType::kByte;
      seen[byte] = true;
    }
  }
  for (unsigned b = 0; b < 256; ++b) {
    if (!seen[b]) model.fail("vocab", strformat("lacks the byte token <0x%02X>, which byte_fallback needs", b));
  }
  if (const std::optional<std::string> unk = model.get_string("unk_token")) {
    const auto id = find_id(spec, *unk);
    if (!id) model.fail("unk_token", strformat("is '%s', which is not in the vocabulary", unk->c_str()));
    spec.unk = id;
    if (spec.types[static_cast<size_t>(*id)] == TokenType::kNormal) spec.types[static_cast<size_t>(*id)] = TokenType::kUnknown;
  }
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < spec.tokens.size(); ++i) ids.emplace(spec.tokens[i], static_cast<int32_t>(i));
  spec.scores.assign(spec.tokens.size(), -static_cast<float>(spec.merges.size()));
  std::vector<bool> made(spec.tokens.size(), false);
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    std::string joined = spec.merges[rank];
    const size_t space = joined.find(' ', 1);
    if (space == std::string::npos) continue;  // reported by the tokenizer
    joined.erase(space, 1);
    const auto it = ids.find(joined);
    if (it == ids.end() || made[static_cast<size_t>(it->second)]) continue;
    made[static_cast<size_t>(it->second)] = true;
    spec.scores[static_cast<size_t>(it->second)] = -static_cast<float>(rank);
  }
}

// BOS/EOS that encoding adds, as the post-processor's template says (Llama 3:
// "<|begin_of_text|> $A"; BERT: "[CLS] $A [SEP]"). Returns the template's
// leading token, if any; `last` gets its trailing one.
std::optional<int32_t> read_post_processor(const JsonObject& proc, const TokenizerSpec& spec, bool& add_bos,
                                           bool& add_eos, std::optional<int32_t>& last) {
  const std::string type = proc.require_string("type");
  std::optional<int32_t> bos;
  if (type == "Sequence") {
    const json& list = proc.require("processors");
    if (!list.is_array()) proc.fail("processors", "must be a list");
    for (size_t i = 0; i < list.size(); ++i) {
      const JsonObject p(proc.path(), list[i], proc.key_path(strformat("processors[%zu]", i)));
      if (auto b = read_post_processor(p, spec, add_bos, add_eos, last)) bos = b;
    }
  } else if (type == "TemplateProcessing") {
    const json& single = proc.require("single");
    if (!single.is_array() || single.empty()) proc.fail("single", "must be a non-empty list");
    auto special = [&](const json& item) -> std::optional<int32_t> {
      const auto it = item.find("SpecialToken");
      if (it == item.end()) return std::nullopt;
      const std::string text = it->value("id", "");
      const auto id = find_id(spec, text);
      if (!id) proc.fail("single", strformat("names the token '%s', which is not in the vocabulary", text.c_str()));
      return id;
    };
    bos = special(single.front());
    add_bos = bos.has_value();
    if (single.size() > 1) last = special(single.back());
    add_eos = last.has_value();
  } else if (type == "BertProcessing") {  // "[CLS] $A [SEP]" written as {"cls": [text, id], "sep": [text, id]}
    auto named = [&](const char* key) {
      const json& pair = proc.require(key);
      const auto id = pair.is_array() && !pair.empty() && pair[0].is_string()
                          ? find_id(spec, pair[0].get<std::string>()) : std::nullopt;
      if (!id) proc.fail(key, strformat("must be [text, id] of a token in the vocabulary, not %s", pair.dump().c_str()));
      return id;
    };
    bos = named("cls");
    last = named("sep");
    add_bos = add_eos = true;
  } else if (type != "ByteLevel") {  // ByteLevel only adjusts offsets
    proc.fail("type", strformat("is the post-processor '%s', which is not supported", type.c_str()));
  }
  return bos;
}

// tokenizer_config.json's bos_token / eos_token: a string, {"content": ...} or null.
std::optional<int32_t> special_token(const JsonObject& cfg, std::string_view key, const TokenizerSpec& spec) {
  const json* v = cfg.find(key);
  if (!v) return std::nullopt;
  const json* content = v->is_object() && v->contains("content") ? &(*v)["content"] : v;
  if (!content->is_string()) cfg.fail(key, "must be a string or {\"content\": string}");
  const auto id = find_id(spec, content->get<std::string>());
  if (!id) cfg.fail(key, strformat("is '%s', which is not in the vocabulary", content->get<std::string>().c_str()));
  return id;
}

// A single template, or the "default" of a list of named ones.
std::string chat_template(const JsonObject& cfg) {
  const json* t = cfg.find("chat_template");
  if (!t) return {};
  if (t->is_string()) return t->get<std::string>();
  if (t->is_array()) {
    for (const json& named : *t) {
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string()) {
        return named["template"].get<std::string>();
      }
    }
  }
  cfg.fail("chat_template", "must be a string or a list holding {\"name\": \"default\", \"template\": string}");
}

void read_tokenizer_config(const std::string& dir, TokenizerSpec& spec) {
  namespace fs = std::filesystem;
  if (fs::exists(dir + "/tokenizer_config.json")) {
    const JsonFile file = JsonFile::read(dir + "/tokenizer_config.json");
    const JsonObject cfg(file.path, file.root, "");
    if (auto bos = special_token(cfg, "bos_token", spec)) spec.bos = bos;
    spec.eos = special_token(cfg, "eos_token", spec);
    spec.unk = special_token(cfg, "unk_token", spec);
    spec.chat_template = chat_template(cfg);
  }
  // Newer checkpoints keep the template in a file of its own: the text, or
  // (image-text checkpoints' processors) JSON holding it under chat_template.
  const std::string jinja = dir + "/chat_template.jinja";
  if (spec.chat_template.empty() && fs::exists(jinja)) {
    std::ifstream in(jinja, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) throw FileFormatError(strformat("%s: cannot read the file", jinja.c_str()));
    spec.chat_template = text.str();
  }
  const std::string processor = dir + "/chat_template.json";
  if (spec.chat_template.empty() && fs::exists(processor)) {
    const JsonFile file = JsonFile::read(processor);
    spec.chat_template = chat_template(JsonObject(file.path, file.root, ""));
  }
}

}  // namespace

TokenizerSpec Tokenizer::spec_from_hf(const std::string& dir) {
  const JsonFile file = JsonFile::read(dir + "/tokenizer.json");
  const JsonObject root(file.path, file.root, "");
  const JsonObject model = root.object("model");
  const bool wordpiece = model.require_string("type") == "WordPiece";
  const bool sentencepiece = !wordpiece && check_bpe_model(model);
  TokenizerSpec spec;
  if (sentencepiece) {
    spec.model = "llama";
    read_space_handling(root, spec);
  } else if (!wordpiece) {
    spec.model = "gpt2";
    spec.pre = hf_pre_tokenizer_name(root);
    spec.normalize_nfc = hf_normalizes_nfc(root);
    spec.ignore_merges = model.get_bool("ignore_merges").value_or(false);
  }
  read_vocab(root, model, spec);
  if (wordpiece) {
    read_wordpiece_json(root, model, spec);
  } else {
    spec.merges = read_merges(model);
  }
  if (sentencepiece) spm_types_and_scores(model, spec);
  bool add_bos = false, add_eos = false;
  std::optional<int32_t> last;
  if (const json* proc = root.find("post_processor")) {
    spec.bos = read_post_processor(JsonObject(file.path, *proc, "post_processor"), spec, add_bos, add_eos, last);
  }
  spec.add_bos = add_bos;
  spec.add_eos = add_eos;
  const std::optional<int32_t> model_unk = spec.unk;
  read_tokenizer_config(dir, spec);
  if (wordpiece) {
    spec.unk = model_unk;  // the WordPiece model spells unknown words with its own unk_token
    // BERT's [SEP] ends every encoded text but is no tokenizer_config eos_token.
    if (add_eos && !spec.eos) spec.eos = last;
  }
  return spec;
}

std::unique_ptr<Tokenizer> Tokenizer::from_hf(const std::string& dir) { return create(spec_from_hf(dir)); }

}  // namespace exactly
