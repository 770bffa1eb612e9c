// Tokenizer::from_hf on small tokenizer.json files written here. Agreement
// with the `tokenizers` package on a real vocabulary and corpus is in
// tests/e2e/test_hf_tokenizer.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "test_vocab.h"
#include "tokenizer/tokenizer.h"

namespace exactly {
namespace {

using nlohmann::json;
using testing::byte_level_spec;
using testing::pieces;
using Strings = std::vector<std::string>;

const std::vector<std::pair<std::string, std::string>> kHelloMerges = {
    {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "hello"}};

const json kByteLevel = {
    {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};

json split(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}
json sequence(json steps) { return {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}}; }
const json kByteLevelNoRegex = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
const std::string kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const std::string kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// tokenizer.json of testing::byte_level_spec(merges): the same ids, merges as
// [left, right] pairs (tokenizers >= 0.20) or "left right" strings.
json tokenizer_json(const std::vector<std::pair<std::string, std::string>>& merges, bool string_merges = false) {
  const TokenizerSpec spec = byte_level_spec(merges);
  json vocab = json::object(), merge_list = json::array();
  for (size_t i = 0; i < spec.tokens.size(); ++i) vocab[spec.tokens[i]] = i;
  for (const std::string& m : spec.merges) {
    const size_t space = m.find(' ', 1);
    merge_list.push_back(string_merges ? json(m) : json::array({m.substr(0, space), m.substr(space + 1)}));
  }
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", kByteLevel},
          {"post_processor", {{"type", "ByteLevel"}, {"trim_offsets", false}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"byte_fallback", false},
            {"vocab", vocab},
            {"merges", merge_list}}}};
}

// A fresh checkpoint directory holding the given files.
std::string write_dir(const json& tokenizer, const json& config = nullptr, const std::string& jinja = "") {
  static int counter = 0;
  const auto dir = std::filesystem::path(::testing::TempDir()) /
                   ("hf_tokenizer_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
  if (!config.is_null()) std::ofstream(dir / "tokenizer_config.json") << config.dump();
  if (!jinja.empty()) std::ofstream(dir / "chat_template.jinja") << jinja;
  return dir.string();
}

std::string error_of(const std::string& dir) {
  try {
    Tokenizer::from_hf(dir);
  } catch (const FileFormatError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(HfTokenizer, MergesInBothFormsGiveTheGgufIds) {
  const auto gguf = Tokenizer::create(byte_level_spec(kHelloMerges));
  for (bool string_merges : {false, true}) {
    const auto tok = Tokenizer::from_hf(write_dir(tokenizer_json(kHelloMerges, string_merges)));
    EXPECT_EQ(pieces(*tok, tok->encode("hello hello", false)), (Strings{"hello", " hello"}));
    EXPECT_EQ(tok->encode("hello hell oh", false), gguf->encode("hello hell oh", false));
    EXPECT_EQ(tok->vocab_size(), gguf->vocab_size());
    EXPECT_FALSE(tok->add_bos());
  }
}

TEST(HfTokenizer, MergeRankIsTheListOrder) {
  const auto ab = Tokenizer::from_hf(write_dir(tokenizer_json({{"a", "b"}, {"b", "c"}})));
  EXPECT_EQ(pieces(*ab, ab->encode("abc", false)), (Strings{"ab", "c"}));
  const auto bc = Tokenizer::from_hf(write_dir(tokenizer_json({{"b", "c"}, {"a", "b"}})));
  EXPECT_EQ(pieces(*bc, bc->encode("abc", false)), (Strings{"a", "bc"}));
}

TEST(HfTokenizer, AddedTokensPastTheVocabulary) {
  json t = tokenizer_json(kHelloMerges);
  const int n = static_cast<int>(t["model"]["vocab"].size());
  t["added_tokens"] = {{{"id", n}, {"content", "<|eot_id|>"}, {"special", true}},
                       {{"id", n + 1}, {"content", "<tool>"}, {"special", false}}};
  const auto tok = Tokenizer::from_hf(write_dir(t));
  ASSERT_EQ(tok->vocab_size(), n + 2);
  EXPECT_EQ(tok->token_type(n), TokenType::kControl);
  EXPECT_EQ(tok->token_type(n + 1), TokenType::kUserDefined);
  EXPECT_TRUE(tok->is_end_of_generation(n));
  const std::vector<int32_t> ids = tok->encode("hello<|eot_id|><tool>", true);
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], n);
  EXPECT_EQ(ids[2], n + 1);
  EXPECT_GT(tok->encode("hello<|eot_id|><tool>", false).size(), 3u);
  EXPECT_EQ(tok->decode(ids), "hello<tool>");  // control tokens are not rendered by default
}

TEST(HfTokenizer, TemplatePostProcessorAddsBos) {
  json t = tokenizer_json(kHelloMerges);
  const int n = static_cast<int>(t["model"]["vocab"].size());
  t["added_tokens"] = {{{"id", n}, {"content", "<|begin_of_text|>"}, {"special", true}}};
  const json templ = {{"type", "TemplateProcessing"},
                      {"single",
                       {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}};
  t["post_processor"] = {{"type", "Sequence"}, {"processors", {{{"type", "ByteLevel"}}, templ}}};
  const auto tok = Tokenizer::from_hf(write_dir(t));
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->bos_id(), n);
}

TEST(HfTokenizer, ConfigGivesBosEosAndChatTemplate) {
  json t = tokenizer_json(kHelloMerges);
  const int n = static_cast<int>(t["model"]["vocab"].size());
  t["added_tokens"] = {{{"id", n}, {"content", "<s>"}, {"special", true}},
                       {{"id", n + 1}, {"content", "</s>"}, {"special", true}}};
  const json cfg = {{"bos_token", "<s>"},
                    {"eos_token", {{"content", "</s>"}, {"lstrip", false}}},
                    {"chat_template", "{{ bos_token }}"}};
  const auto tok = Tokenizer::from_hf(write_dir(t, cfg));
  EXPECT_EQ(tok->bos_id(), n);
  EXPECT_EQ(tok->eos_id(), n + 1);
  EXPECT_EQ(tok->chat_template(), "{{ bos_token }}");
  EXPECT_FALSE(tok->add_bos());  // the post-processor, not the config, adds tokens

  json named = cfg;
  named["chat_template"] = {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}};
  EXPECT_EQ(Tokenizer::from_hf(write_dir(t, named))->chat_template(), "D");
  json bare = cfg;
  bare.erase("chat_template");
  bare["bos_token"] = nullptr;  // Qwen2 has no BOS
  const auto from_file = Tokenizer::from_hf(write_dir(t, bare, "J"));
  EXPECT_EQ(from_file->chat_template(), "J");
  EXPECT_EQ(from_file->bos_id(), std::nullopt);
}

TEST(HfTokenizer, PreTokenizerFamilies) {
  auto pre_of = [](const json& pre_tokenizer) {
    json t = tokenizer_json({});
    t["pre_tokenizer"] = pre_tokenizer;
    return Tokenizer::spec_from_hf(write_dir(t)).pre;
  };
  EXPECT_EQ(pre_of(kByteLevel), "gpt2");
  EXPECT_EQ(pre_of(sequence({{{"type", "Digits"}, {"individual_digits", true}}, kByteLevel})), "smollm");
  EXPECT_EQ(pre_of(sequence({split(kLlama3Regex), kByteLevelNoRegex})), "llama-bpe");
  EXPECT_EQ(pre_of(sequence({split(kQwen2Regex), kByteLevelNoRegex})), "qwen2");

  json llama3 = tokenizer_json({});
  llama3["pre_tokenizer"] = sequence({split(kLlama3Regex), kByteLevelNoRegex});
  EXPECT_FALSE(*Tokenizer::spec_from_hf(write_dir(llama3)).ignore_merges);
  llama3["model"]["ignore_merges"] = true;
  EXPECT_TRUE(*Tokenizer::spec_from_hf(write_dir(llama3)).ignore_merges);
}

TEST(HfTokenizer, DigitSplitChangesTheIds) {
  // Guards the mapping: with SmolLM2's Digits step, "12" cannot merge.
  json t = tokenizer_json({{"1", "2"}});
  EXPECT_EQ(Tokenizer::from_hf(write_dir(t))->encode("12", false).size(), 1u);
  t["pre_tokenizer"] = sequence({{{"type", "Digits"}, {"individual_digits", true}}, kByteLevel});
  EXPECT_EQ(Tokenizer::from_hf(write_dir(t))->encode("12", false).size(), 2u);
}

// Each edit of a valid tokenizer.json, and the text its error must contain.
struct BadCase {
  std::string what;
  std::function<void(json&)> edit;
  std::string message;
};

TEST(HfTokenizer, ErrorsNameFileAndKey) {
  const std::vector<BadCase> cases = {
      {"unigram", [](json& t) { t["model"]["type"] = "Unigram"; }, "'model.type' is 'Unigram'"},
      {"sentencepiece bpe", [](json& t) { t["model"]["byte_fallback"] = true; }, "'model.byte_fallback'"},
      {"metaspace",
       [](json& t) {
         t["pre_tokenizer"] = {{"type", "Metaspace"}};
       },
       "'pre_tokenizer.type' is the pre-tokenizer 'Metaspace'"},
      {"no byte level", [](json& t) { t["pre_tokenizer"] = nullptr; }, "has no ByteLevel step"},
      {"unknown regex",
       [](json& t) {
         t["pre_tokenizer"] = sequence({split("\\w+"), kByteLevelNoRegex});
       },
       "splits by \\w+"},
      {"prefix space", [](json& t) { t["pre_tokenizer"]["add_prefix_space"] = true; },
       "'pre_tokenizer.add_prefix_space' must be false"},
      {"lowercase",
       [](json& t) {
         t["normalizer"] = {{"type", "Lowercase"}};
       },
       "the normalizer 'Lowercase'"},
      {"bad merge", [](json& t) { t["model"]["merges"][0] = 7; }, "'model.merges[0]' must be"},
      {"unknown merge", [](json& t) { t["model"]["merges"][0] = "zz q"; }, "tokenizer.ggml.merges[0]"},
      {"id gap",
       [](json& t) {
         t["added_tokens"] = {{{"id", 9999}, {"content", "<x>"}}};
       },
       "has no token with id"},
      {"id clash",
       [](json& t) {
         t["added_tokens"] = {{{"id", 0}, {"content", "<x>"}}};
       },
       "already belongs to"},
      {"lstrip",
       [](json& t) {
         t["added_tokens"] = {{{"id", 0}, {"content", "!"}, {"lstrip", true}}};
       },
       "'added_tokens[0].lstrip' is true"},
      {"no vocab", [](json& t) { t["model"].erase("vocab"); }, "'model.vocab' is missing"},
      {"string id", [](json& t) { t["model"]["vocab"]["!"] = "0"; }, "'model.vocab.!' has the invalid token id"},
  };
  for (const BadCase& c : cases) {
    json t = tokenizer_json(kHelloMerges);
    c.edit(t);
    const std::string dir = write_dir(t);
    const std::string e = error_of(dir);
    EXPECT_HAS(e, c.message) << c.what;
    if (c.message.find("ggml") == std::string::npos) {
      EXPECT_HAS(e, dir + "/tokenizer.json") << c.what;
    }
  }
  const std::string no_eos = write_dir(tokenizer_json(kHelloMerges), {{"eos_token", "</s>"}});
  EXPECT_HAS(error_of(no_eos), no_eos + "/tokenizer_config.json: key 'eos_token' is '</s>', which is not in");
  EXPECT_HAS(error_of("/nonexistent"), "/nonexistent/tokenizer.json: cannot open");
}

}  // namespace
}  // namespace exactly
