#include "tokenizer/hf_pre_tokenizer.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <vector>

#include "core/format.h"
#include "loader/json_file.h"
#include "tokenizer/pre_tokenizer_regexes.h"

namespace exactly {
namespace {

using nlohmann::json;

// The regexes as tokenizer.json spells them; PreTokenizer holds their RE2
// translations (pretokenizer.cc).
constexpr std::string_view kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kEachDigit = R"(\p{N})";  // Digits with individual_digits

struct Family {
  std::string_view name;
  std::vector<std::string_view> splits;  // isolated regex splits, in order
};

const std::array<Family, 8>& families() {
  static const std::array<Family, 8> f = {{
      {"gpt2", {kGpt2}},
      {"smollm", {kEachDigit, kGpt2}},
      {"llama-bpe", {kLlama3}},
      {"qwen2", {kQwen2}},
      {"gpt-4o", {kGpt4oWithTail}},
      {"deepseek-llm", {kLineBreak, kDeepseekLetters, kDeepseekPunctuation, kTrailingSpaces, kDeepseekCjk, kEachDigit}},
      {"deepseek-coder", {kLineBreak, R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, kEachDigit}},
      {"deepseek-v3", {R"(\p{N}{1,3})", kDeepseekV3Kana, kDeepseekV3WordsWithTail}},
  }};
  return f;
}

// Appends the splits one pre-tokenizer performs; notes its ByteLevel step.
void reduce(const JsonObject& step, std::vector<std::string>& splits, bool& byte_level) {
  const std::string type = step.require_string("type");
  if (type == "Sequence") {
    const json& list = step.require("pretokenizers");
    if (!list.is_array()) step.fail("pretokenizers", "must be a list");
    for (size_t i = 0; i < list.size(); ++i) {
      reduce(JsonObject(step.path(), list[i], step.key_path(strformat("pretokenizers[%zu]", i))), splits, byte_level);
    }
  } else if (type == "ByteLevel") {
    if (byte_level) step.fail("type", "is a second ByteLevel step");
    // A prefix space would change the first piece of every text.
    if (step.get_bool("add_prefix_space").value_or(true)) step.fail("add_prefix_space", "must be false");
    if (step.get_bool("use_regex").value_or(true)) splits.emplace_back(kGpt2);
    byte_level = true;
  } else if (type == "Split") {
    const std::optional<std::string> regex = step.object("pattern").get_string("Regex");
    if (!regex) step.fail("pattern", "must be {\"Regex\": ...}");
    if (step.require_string("behavior") != "Isolated") step.fail("behavior", "must be \"Isolated\"");
    if (step.get_bool("invert").value_or(false)) step.fail("invert", "must be false");
    if (byte_level) step.fail("type", "is a Split after ByteLevel, which no known tokenizer does");
    splits.push_back(*regex);
  } else if (type == "Digits") {
    if (!step.get_bool("individual_digits").value_or(false)) step.fail("individual_digits", "must be true");
    splits.emplace_back(kEachDigit);
  } else {
    step.fail("type", strformat("is the pre-tokenizer '%s', which is not supported (supported: Sequence, "
                                "ByteLevel, Split, Digits)",
                                type.c_str()));
  }
}

void check_normalizer(const JsonObject& root) {
  const json* n = root.find("normalizer");
  if (!n) return;
  const JsonObject normalizer(root.path(), *n, "normalizer");
  const std::string type = normalizer.require_string("type");
  if (type == "NFC") return;  // applied by the tokenizer (TokenizerSpec::normalize_nfc)
  if (type == "Sequence" && normalizer.require("normalizers").empty()) return;
  normalizer.fail("type", strformat("is the normalizer '%s', which is not supported (byte-level BPE "
                                    "tokenizers have none, or NFC)",
                                    type.c_str()));
}

}  // namespace

bool hf_normalizes_nfc(const JsonObject& root) {
  const json* n = root.find("normalizer");
  return n != nullptr && n->is_object() && JsonObject(root.path(), *n, "normalizer").require_string("type") == "NFC";
}

std::string hf_pre_tokenizer_name(const JsonObject& root) {
  check_normalizer(root);
  std::vector<std::string> splits;
  bool byte_level = false;
  if (const json* pre = root.find("pre_tokenizer"))
    reduce(JsonObject(root.path(), *pre, "pre_tokenizer"), splits, byte_level);
  if (!byte_level) {
    root.fail("pre_tokenizer", "has no ByteLevel step; only byte-level BPE tokenizers are supported");
  }
  for (const Family& f : families()) {
    if (std::equal(splits.begin(), splits.end(), f.splits.begin(), f.splits.end())) return std::string(f.name);
  }
  std::string seen;
  for (const std::string& s : splits) seen += (seen.empty() ? "" : " then ") + s;
  root.fail("pre_tokenizer", strformat("splits by %s, which matches none of the known pre-tokenizers (GPT-2, "
                                       "SmolLM2, Llama 3, Qwen2, GPT-4o, DeepSeek LLM, Coder and V3)",
                                       seen.empty() ? "nothing" : seen.c_str()));
}

}  // namespace exactly
