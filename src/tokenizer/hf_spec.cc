// Reading TokenizerSpec from a Hugging Face checkpoint: tokenizer.json holds
// the vocabulary, merges, added tokens and pre-tokenizer; tokenizer_config.json
// the chat template and the BOS/EOS texts.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/format.h"
#include "loader/json_file.h"
#include "tokenizer/hf_pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace exactly {
namespace {

using nlohmann::json;

// Options of the BPE model that would change the ids of a byte-level vocabulary.
void check_bpe_model(const JsonObject& model) {
  const std::string type = model.require_string("type");
  if (type != "BPE") {
    model.fail("type", strformat("is '%s'; only byte-level BPE tokenizers are supported", type.c_str()));
  }
  if (model.get_bool("byte_fallback").value_or(false)) {
    model.fail("byte_fallback", "is true (a SentencePiece-style BPE); only byte-level BPE is supported");
  }
  if (!model.get_string("continuing_subword_prefix").value_or("").empty()) {
    model.fail("continuing_subword_prefix", "is set; byte-level BPE has none");
  }
  if (!model.get_string("end_of_word_suffix").value_or("").empty()) {
    model.fail("end_of_word_suffix", "is set; byte-level BPE has none");
  }
  if (model.get_number("dropout").value_or(0.0) != 0.0) model.fail("dropout", "is set; encoding must be deterministic");
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
        model.fail(key, "has a token containing a space, which a byte-level vocabulary cannot have");
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

// BOS/EOS that encoding adds, as the post-processor's template says (Llama 3:
// "<|begin_of_text|> $A"). Returns the template's leading token, if any.
std::optional<int32_t> read_post_processor(const JsonObject& proc, const TokenizerSpec& spec, bool& add_bos,
                                           bool& add_eos) {
  const std::string type = proc.require_string("type");
  std::optional<int32_t> bos;
  if (type == "Sequence") {
    const json& list = proc.require("processors");
    if (!list.is_array()) proc.fail("processors", "must be a list");
    for (size_t i = 0; i < list.size(); ++i) {
      const JsonObject p(proc.path(), list[i], proc.key_path(strformat("processors[%zu]", i)));
      if (auto b = read_post_processor(p, spec, add_bos, add_eos)) bos = b;
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
    add_eos = single.size() > 1 && special(single.back()).has_value();
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
  // Newer checkpoints keep the template in a file of its own.
  const std::string jinja = dir + "/chat_template.jinja";
  if (spec.chat_template.empty() && fs::exists(jinja)) {
    std::ifstream in(jinja, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) throw FileFormatError(strformat("%s: cannot read the file", jinja.c_str()));
    spec.chat_template = text.str();
  }
}

}  // namespace

TokenizerSpec Tokenizer::spec_from_hf(const std::string& dir) {
  const JsonFile file = JsonFile::read(dir + "/tokenizer.json");
  const JsonObject root(file.path, file.root, "");
  const JsonObject model = root.object("model");
  check_bpe_model(model);
  TokenizerSpec spec;
  spec.model = "gpt2";
  spec.pre = hf_pre_tokenizer_name(root);
  spec.ignore_merges = model.get_bool("ignore_merges").value_or(false);
  read_vocab(root, model, spec);
  spec.merges = read_merges(model);
  bool add_bos = false, add_eos = false;
  if (const json* proc = root.find("post_processor")) {
    spec.bos = read_post_processor(JsonObject(file.path, *proc, "post_processor"), spec, add_bos, add_eos);
  }
  spec.add_bos = add_bos;
  spec.add_eos = add_eos;
  read_tokenizer_config(dir, spec);
  return spec;
}

std::unique_ptr<Tokenizer> Tokenizer::from_hf(const std::string& dir) { return create(spec_from_hf(dir)); }

}  // namespace exactly
