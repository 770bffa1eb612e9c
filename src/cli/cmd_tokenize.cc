// `exactly tokenize`: text -> token ids (and back with --decode), the way the
// engine tokenizes prompts. Used by the end-to-end tests to compare against an
// independent tokenizer, so --jsonl handles many inputs in one process.
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/loaded_model.h"
#include "loader/gguf.h"
#include "tokenizer/tokenizer.h"

namespace exactly::cli {
namespace {

using nlohmann::json;

struct TokenizeOptions {
  std::string model;
  std::string text;        // positional TEXT
  std::string file;        // -f: exact bytes of the text
  std::string jsonl;       // --jsonl: one JSON string (or id array with --decode) per line
  bool json = false;
  bool no_parse_special = false;
  bool show_pieces = false;
  bool decode = false;
};

// JSON text of `s`; bytes that are not UTF-8 become U+FFFD (JSON cannot carry them).
std::string json_string(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<int32_t> ids_from_json(const json& j, int32_t vocab, const std::string& where) {
  if (!j.is_array()) throw Error(where + ": expected a JSON array of token ids", ExitCode::kUsage);
  std::vector<int32_t> ids;
  for (const json& v : j) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab) {
      throw Error(strformat("%s: %s is not a token id of this vocabulary (size %d)", where.c_str(),
                            v.dump().c_str(), vocab), ExitCode::kUsage);
    }
    ids.push_back(v.get<int32_t>());
  }
  return ids;
}

std::string ids_line(const Tokenizer& tok, const std::vector<int32_t>& ids, const TokenizeOptions& o) {
  std::string out;
  if (o.show_pieces) {
    if (o.json) {
      json arr = json::array();
      for (int32_t id : ids) arr.push_back({{"id", id}, {"piece", tok.token_bytes(id, true)}});
      return arr.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    for (int32_t id : ids) out += strformat("%d\t%s\n", id, json_string(tok.token_bytes(id, true)).c_str());
    if (!out.empty()) out.pop_back();
    return out;
  }
  if (o.json) return json(ids).dump();
  for (size_t i = 0; i < ids.size(); ++i) out += strformat(i ? " %d" : "%d", ids[i]);
  return out;
}

// Each line of the file is one input; each gives one output line.
void run_jsonl(const Tokenizer& tok, const TokenizeOptions& o) {
  std::ifstream in(o.jsonl, std::ios::binary);
  if (!in) throw Error(strformat("cannot open %s", o.jsonl.c_str()), ExitCode::kBadInput);
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    const std::string where = strformat("%s:%zu", o.jsonl.c_str(), number);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      throw Error(where + ": " + e.what(), ExitCode::kBadInput);
    }
    if (o.decode) {
      const std::vector<int32_t> ids = ids_from_json(j, tok.vocab_size(), where);
      std::printf("%s\n", json_string(tok.decode(ids, true)).c_str());
      continue;
    }
    if (!j.is_string()) throw Error(where + ": expected a JSON string", ExitCode::kBadInput);
    const std::vector<int32_t> ids = tok.encode(j.get<std::string>(), !o.no_parse_special);
    TokenizeOptions as_json = o;  // one JSON array per line whatever --json says
    as_json.json = true;
    std::printf("%s\n", ids_line(tok, ids, as_json).c_str());
  }
}

void run(TokenizeOptions& o, const CLI::App& cmd) {
  const size_t sources = cmd.count("TEXT") + cmd.count("--file") + cmd.count("--jsonl");
  if (sources != 1) throw Error("tokenize: give exactly one of TEXT, -f FILE or --jsonl FILE", ExitCode::kUsage);
  // A Hugging Face checkpoint's tokenizer.json needs no weights (nor a GPU).
  const std::unique_ptr<GGUFFile> file = is_hf_checkpoint(o.model) ? nullptr : GGUFFile::open(o.model);
  const std::unique_ptr<Tokenizer> tok =
      file ? Tokenizer::from_gguf(*file) : Tokenizer::from_hf(hf_checkpoint_dir(o.model));
  if (!o.jsonl.empty()) {
    run_jsonl(*tok, o);
    return;
  }
  const std::string text = cmd.count("--file") ? read_file(o.file) : o.text;
  if (o.decode) {
    // Raw bytes, exactly what the ids stand for (special tokens rendered).
    // A JSON array, or ids separated by commas / whitespace.
    const size_t first = text.find_first_not_of(" \t\r\n");
    json j;
    if (first != std::string::npos && text[first] == '[') {
      try {
        j = json::parse(text);
      } catch (const json::parse_error& e) {
        throw Error(std::string("--decode: ") + e.what(), ExitCode::kUsage);
      }
    } else {
      j = parse_token_list(text, "--decode");
    }
    const std::string bytes = tok->decode(ids_from_json(j, tok->vocab_size(), "--decode"), true);
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return;
  }
  std::printf("%s\n", ids_line(*tok, tok->encode(text, !o.no_parse_special), o).c_str());
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  opts->model = default_model_path();
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text (no BOS/EOS added)");
  cmd->add_option("-m,--model", opts->model, "GGUF model file")->capture_default_str();
  cmd->add_option("TEXT", opts->text, "text to tokenize (or ids to decode with --decode)");
  cmd->add_option("-f,--file", opts->file, "read the text from a file (exact bytes)");
  cmd->add_option("--jsonl", opts->jsonl, "one JSON string per line; prints one JSON array of ids per line");
  cmd->add_flag("--json", opts->json, "print one JSON array on one line");
  cmd->add_flag("--no-parse-special", opts->no_parse_special, "tokenize special-token text as ordinary characters");
  cmd->add_flag("--show-pieces", opts->show_pieces, "print each token's bytes beside its id");
  cmd->add_flag("--decode", opts->decode, "input is token ids (JSON array or list); print the text they stand for");
  cmd->callback([opts, cmd] { run(*opts, *cmd); });
}

}  // namespace exactly::cli
