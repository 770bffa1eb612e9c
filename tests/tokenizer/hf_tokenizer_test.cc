// Tokenizer::from_hf on small tokenizer.json files written here. Agreement
// with the `tokenizers` package on a real vocabulary and corpus is in
// tests/e2e/test_hf_tokenizer.py.
#include <gtest/gtest.h>

#include <cstdio>
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

  // An image-text checkpoint's processor keeps it in chat_template.json;
  // tokenizer_config.json's and chat_template.jinja's come first.
  const std::string processor_dir = write_dir(t, bare);
  std::ofstream(std::filesystem::path(processor_dir) / "chat_template.json") << json{{"chat_template", "P"}}.dump();
  EXPECT_EQ(Tokenizer::from_hf(processor_dir)->chat_template(), "P");
  const std::string both = write_dir(t, bare, "J");
  std::ofstream(std::filesystem::path(both) / "chat_template.json") << json{{"chat_template", "P"}}.dump();
  EXPECT_EQ(Tokenizer::from_hf(both)->chat_template(), "J");
  const std::string bad = write_dir(t, bare);
  std::ofstream(std::filesystem::path(bad) / "chat_template.json") << json{{"chat_template", 7}}.dump();
  EXPECT_HAS(error_of(bad), "chat_template.json: key 'chat_template' must be a string");
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
      // byte_fallback makes it SentencePiece-style, which a ByteLevel pre-tokenizer is not.
      {"sentencepiece bpe", [](json& t) { t["model"]["byte_fallback"] = true; },
       "a SentencePiece-style (byte_fallback) BPE needs"},
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

// A SentencePiece-style tokenizer.json (Llama 2's shape): <unk> <s> </s>, the
// 256 byte tokens, then `pieces` (single characters and merge results), with
// the normalizer Sequence[Prepend("▁"), Replace(" ", "▁")] and "<s> $A".
const std::string kMark = "\xE2\x96\x81";  // ▁
json spm_tokenizer_json(const Strings& pieces, const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object(), merge_list = json::array();
  int id = 0;
  for (const char* t : {"<unk>", "<s>", "</s>"}) vocab[t] = id++;
  for (int b = 0; b < 256; ++b) {
    char text[8];
    std::snprintf(text, sizeof text, "<0x%02X>", b);
    vocab[text] = id++;
  }
  for (const std::string& p : pieces) vocab[p] = id++;
  for (const auto& [l, r] : merges) merge_list.push_back({l, r});
  json added = json::array();
  for (int i = 0; i < 3; ++i) {
    added.push_back({{"id", i}, {"content", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>"}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMark}};
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", kMark}}, replace}}}},
          {"pre_tokenizer", nullptr},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"pair", json::array()},
            {"special_tokens", json::object()}}},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", "<unk>"},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merge_list}}}};
}

constexpr int32_t kFirstPiece = 3 + 256;
const Strings kAbcPieces = {kMark, "a", "b", "c", "bc", "ab", "abc", kMark + "a"};  // ids 259..266

json metaspace(const std::string& scheme) {
  return {{"type", "Metaspace"}, {"replacement", kMark}, {"prepend_scheme", scheme}, {"split", false}};
}

TEST(HfTokenizer, SentencePieceBpeBecomesLlama) {
  const auto merges = std::vector<std::pair<std::string, std::string>>{{"b", "c"}, {"a", "b"}, {"ab", "c"}, {kMark, "a"}};
  const std::string dir = write_dir(spm_tokenizer_json(kAbcPieces, merges));
  const TokenizerSpec spec = Tokenizer::spec_from_hf(dir);
  EXPECT_EQ(spec.model, "llama");
  EXPECT_EQ(spec.add_bos, true);
  EXPECT_EQ(spec.bos, 1);
  EXPECT_EQ(spec.unk, 0);
  EXPECT_EQ(spec.add_space_prefix, true);
  EXPECT_TRUE(spec.space_prefix_after_special);
  EXPECT_EQ(spec.types[0], TokenType::kControl);  // an added special token: its text is matched in the input
  EXPECT_EQ(spec.types[1], TokenType::kControl);
  EXPECT_EQ(spec.types[3], TokenType::kByte);
  EXPECT_EQ(spec.types[3 + 0xA9], TokenType::kByte);
  EXPECT_EQ(spec.types[kFirstPiece], TokenType::kNormal);
  // Scores: minus the rank of the merge that makes the token; -4 (= -num_merges) for the rest.
  EXPECT_EQ(spec.scores[kFirstPiece + 4], 0.0f);   // bc
  EXPECT_EQ(spec.scores[kFirstPiece + 5], -1.0f);  // ab
  EXPECT_EQ(spec.scores[kFirstPiece + 6], -2.0f);  // abc
  EXPECT_EQ(spec.scores[kFirstPiece + 7], -3.0f);  // ▁a
  EXPECT_EQ(spec.scores[kFirstPiece + 1], -4.0f);  // a
  EXPECT_EQ(spec.scores[5], -4.0f);

  const auto tok = Tokenizer::create(spec);
  const int32_t mark = kFirstPiece, a = kFirstPiece + 1, b = kFirstPiece + 2, c = kFirstPiece + 3,
                bc = kFirstPiece + 4, ab = kFirstPiece + 5, abc = kFirstPiece + 6, mark_a = kFirstPiece + 7;
  // "b c" goes first; "a bc" is not a merge, so "abc" never forms (merging
  // by the score of the concatenation would give "▁" "abc").
  EXPECT_EQ(tok->encode("abc", true), (std::vector<int32_t>{mark_a, bc}));
  EXPECT_EQ(tok->encode("ab", true), (std::vector<int32_t>{mark, ab}));  // "a b" (rank 1) before "▁ a" (rank 3)
  EXPECT_EQ(tok->encode("cab", true), (std::vector<int32_t>{mark, c, ab}));
  EXPECT_EQ(tok->encode(" abc", true), (std::vector<int32_t>{mark, mark_a, bc}));
  // The prefix goes before each text between special tokens, as the Prepend normalizer does.
  EXPECT_EQ(tok->encode("<s>ab</s>", true), (std::vector<int32_t>{1, mark, ab, 2}));
  // Characters without a token become bytes: é is C3 A9.
  EXPECT_EQ(tok->encode("é", true), (std::vector<int32_t>{mark, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok->decode(tok->encode("é a  bc", true)), "é a  bc");

  // Reordering the merges changes the ids: "a b" first, then "ab c".
  const auto reordered = std::vector<std::pair<std::string, std::string>>{{"a", "b"}, {"b", "c"}, {"ab", "c"}};
  const auto tok2 = Tokenizer::from_hf(write_dir(spm_tokenizer_json(kAbcPieces, reordered)));
  EXPECT_EQ(tok2->encode("abc", true), (std::vector<int32_t>{mark, abc}));
  (void)a;
  (void)b;
}

TEST(HfTokenizer, SentencePieceSpacePrefixSchemes) {
  const auto merges = std::vector<std::pair<std::string, std::string>>{{kMark, "a"}};
  const int32_t mark = kFirstPiece, a = kFirstPiece + 1, mark_a = kFirstPiece + 7;
  json t = spm_tokenizer_json(kAbcPieces, merges);
  t["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMark}};  // no Prepend
  auto tok = Tokenizer::from_hf(write_dir(t));
  EXPECT_EQ(tok->encode("a a", true), (std::vector<int32_t>{a, mark_a}));

  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = metaspace("first");
  tok = Tokenizer::from_hf(write_dir(t));
  EXPECT_EQ(tok->encode("a", true), (std::vector<int32_t>{mark_a}));
  EXPECT_EQ(tok->encode(" a", true), (std::vector<int32_t>{mark_a}));  // no prefix before a space
  EXPECT_EQ(tok->encode("<s>a", true), (std::vector<int32_t>{1, a}));  // only the first text gets one
  EXPECT_EQ(tok->encode("a<s>a", true), (std::vector<int32_t>{mark_a, 1, a}));

  t["pre_tokenizer"] = metaspace("always");
  tok = Tokenizer::from_hf(write_dir(t));
  EXPECT_EQ(tok->encode("a<s>a", true), (std::vector<int32_t>{mark_a, 1, mark_a}));
  EXPECT_EQ(tok->encode("<s>  a", true), (std::vector<int32_t>{1, mark, mark_a}));

  t["pre_tokenizer"] = metaspace("never");
  tok = Tokenizer::from_hf(write_dir(t));
  EXPECT_EQ(tok->encode("a a", true), (std::vector<int32_t>{a, mark_a}));
}

TEST(HfTokenizer, SentencePieceErrors) {
  const auto merges = std::vector<std::pair<std::string, std::string>>{{kMark, "a"}};
  const std::vector<BadCase> cases = {
      {"unigram", [](json& t) { t["model"]["type"] = "Unigram"; }, "'model.type' is 'Unigram'"},
      {"split metaspace",
       [](json& t) {
         t["normalizer"] = nullptr;
         t["pre_tokenizer"] = metaspace("first");
         t["pre_tokenizer"]["split"] = true;
       },
       "'pre_tokenizer.split' is true"},
      {"byte level pre-tokenizer", [](json& t) { t["pre_tokenizer"] = kByteLevel; },
       "key 'pre_tokenizer' is ByteLevel with the normalizer Prepend, Replace"},
      {"lowercase", [](json& t) { t["normalizer"]["normalizers"][0] = {{"type", "Lowercase"}}; },
       "'normalizer.normalizers[0].type' is the normalizer 'Lowercase'"},
      {"no byte tokens", [](json& t) {
         t["model"]["vocab"].erase("<0x41>");
         t["model"]["vocab"]["A41"] = 3 + 0x41;
       }, "lacks the byte token <0x41>"},
      {"bad merge", [](json& t) { t["model"]["merges"].push_back({"c", "a"}); }, "tokenizer.ggml.merges[1]"},
      {"ignore merges", [](json& t) { t["model"]["ignore_merges"] = true; }, "'model.ignore_merges' is true"},
  };
  for (const BadCase& c : cases) {
    json t = spm_tokenizer_json(kAbcPieces, merges);
    c.edit(t);
    const std::string dir = write_dir(t);
    const std::string e = error_of(dir);
    EXPECT_HAS(e, c.message) << c.what;
  }
  // byte_fallback false: a Metaspace tokenizer.json is read as byte-level BPE, which it is not.
  json t = spm_tokenizer_json(kAbcPieces, merges);
  t["model"]["byte_fallback"] = false;
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = metaspace("first");
  EXPECT_HAS(error_of(write_dir(t)), "'pre_tokenizer.type' is the pre-tokenizer 'Metaspace'");
}

}  // namespace
}  // namespace exactly
