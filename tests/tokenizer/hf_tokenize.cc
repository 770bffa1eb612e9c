// Test tool: encodes texts with the tokenizer of a Hugging Face checkpoint
// directory (Tokenizer::from_hf), so tests/e2e/test_hf_tokenizer.py can compare
// the ids with the `tokenizers` package's.
//
//   hf_tokenize DIR [--no-parse-special] < texts.jsonl   one JSON array of ids per input line
//   hf_tokenize DIR --decode < ids.jsonl                 one JSON string per input array of ids
//   hf_tokenize DIR --spec                               what was read, as one JSON object
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

nlohmann::json spec_summary(const std::string& dir) {
  const exactly::TokenizerSpec spec = exactly::Tokenizer::spec_from_hf(dir);
  const auto tok = exactly::Tokenizer::create(spec);
  auto id = [](const std::optional<int32_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"pre", spec.pre},
          {"vocab_size", tok->vocab_size()},
          {"merges", spec.merges.size()},
          {"ignore_merges", spec.ignore_merges.value_or(false)},
          {"bos", id(tok->bos_id())},
          {"eos", id(tok->eos_id())},
          {"add_bos", tok->add_bos()},
          {"add_eos", tok->add_eos()},
          {"model", spec.model},
          {"unk", id(spec.unk)},
          {"add_space_prefix", spec.add_space_prefix.value_or(false)},
          {"chat_template", tok->chat_template()}};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[2] : "";
  if ((argc != 2 && argc != 3) || (argc == 3 && mode != "--no-parse-special" && mode != "--spec" && mode != "--decode")) {
    std::cerr << "usage: hf_tokenize DIR [--no-parse-special | --decode | --spec] < texts.jsonl\n";
    return 64;
  }
  try {
    if (mode == "--spec") {
      std::cout << spec_summary(argv[1]).dump() << "\n";
      return 0;
    }
    const auto tok = exactly::Tokenizer::from_hf(argv[1]);
    for (std::string line; std::getline(std::cin, line);) {
      if (mode == "--decode") {
        const auto ids = nlohmann::json::parse(line).get<std::vector<int32_t>>();
        // Invalid UTF-8 (a byte token cut from its character) as U+FFFD, as Python's decode does.
        std::cout << nlohmann::json(tok->decode(ids)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                  << "\n";
        continue;
      }
      const std::string text = nlohmann::json::parse(line).get<std::string>();
      std::cout << nlohmann::json(tok->encode(text, mode != "--no-parse-special")).dump() << "\n";
    }
  } catch (const exactly::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return static_cast<int>(e.code());
  }
  return 0;
}
