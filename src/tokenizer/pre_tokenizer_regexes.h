// Split regexes of pre-tokenizers as their tokenizer.json files spell them,
// shared by the GGUF pre-tokenizer table (pretokenizer.cc) and the
// recognition of tokenizer.json pre-tokenizers (hf_pre_tokenizer.cc).
#pragma once

#include <string_view>

namespace exactly {

// GPT-4o / o200k (gpt-oss's tokenizer.json Split regex): letter runs cut
// where case changes (an upper-case run, then lower-case letters, each with
// marks), a contraction kept as the word's suffix, numbers in groups of at
// most three digits, and a symbol run that keeps the newlines and slashes
// after it:
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//   \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// kGpt4o leaves out the whitespace tail RE2 cannot spell (pretokenizer.cc
// emulates it); kGpt4oWithTail is the file's text.
constexpr std::string_view kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+)";
constexpr std::string_view kGpt4oWithTail =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM / Coder (their tokenizer.json Split steps, then Digits with
// individual digits), and DeepSeek V3 (numbers in groups of three, kana and
// CJK runs, then a Llama-3-like word regex whose symbol runs include \p{S}).
constexpr std::string_view kLineBreak = R"([\r\n])";
constexpr std::string_view kDeepseekLetters =
    R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)";
constexpr std::string_view kDeepseekPunctuation = R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)";
constexpr std::string_view kTrailingSpaces = R"(\s+$)";
constexpr std::string_view kDeepseekCjk = R"([一-龥ࠀ-一가-퟿]+)";
constexpr std::string_view kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+)";
// DeepSeek V3's word regex with the whitespace tail that RE2 cannot spell
// (pretokenizer.cc emulates it).
constexpr std::string_view kDeepseekV3WordsWithTail =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kDeepseekV3Kana = R"([一-龥぀-ゟ゠-ヿ]+)";

}  // namespace exactly
