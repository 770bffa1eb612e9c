// `exactly logits`: the fp32 logits of every position of a token sequence, as
// raw little-endian float32 [n_tokens, vocab]. Used to compare the engine with
// independent reference implementations.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"

namespace exactly::cli {

namespace {

struct LogitsOptions {
  ModelOptions model;
  std::string tokens;
  std::string tokens_file;
  std::string out;
  int chunk = 512;
};

void run(const LogitsOptions& o) {
  LoadedModel m = load_model(o.model.model, false, o.model.load_options());
  std::vector<int32_t> ids = o.tokens_file.empty() ? parse_token_list(o.tokens, "--tokens")
                                                   : parse_token_list(read_file(o.tokens_file), o.tokens_file.c_str());
  if (ids.empty()) throw Error("no tokens given", ExitCode::kUsage);
  const int32_t vocab = m.config().vocab_size;
  for (int32_t id : ids)
    if (id >= vocab) throw Error(strformat("token id %d is outside the vocabulary (%d tokens)", id, vocab), ExitCode::kUsage);
  if (static_cast<int64_t>(ids.size()) > m.config().context_length)
    throw Error(strformat("%zu tokens exceed the model's context of %d", ids.size(), m.config().context_length),
                ExitCode::kUsage);

  ThreadPool pool(o.model.resolved_threads());
  Generator gen(*m.model, pool, static_cast<int32_t>(ids.size()), o.chunk);
  std::vector<float> logits(ids.size() * static_cast<size_t>(vocab));
  gen.feed_all(ids, logits.data());

  FILE* f = o.out == "-" ? stdout : std::fopen(o.out.c_str(), "wb");
  if (!f) throw Error(strformat("cannot write %s", o.out.c_str()));
  size_t written = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  if (f != stdout) std::fclose(f);
  if (written != logits.size()) throw Error(strformat("short write to %s", o.out.c_str()));
}

}  // namespace

void register_logits(CLI::App& app) {
  auto o = std::make_shared<LogitsOptions>();
  CLI::App* cmd = app.add_subcommand("logits", "write the logits of every position as raw float32");
  add_model_options(*cmd, o->model);
  auto* t = cmd->add_option("--tokens", o->tokens, "token ids, \"1,2,3\"");
  auto* tf = cmd->add_option("--tokens-file", o->tokens_file, "file of comma/space separated token ids");
  t->excludes(tf);
  cmd->add_option("-o,--out", o->out, "output file (- for stdout)")->required();
  cmd->add_option("--chunk", o->chunk, "tokens per forward pass")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->callback([o, t, tf] {
    if (t->count() + tf->count() == 0) throw CLI::RequiredError("--tokens or --tokens-file");
    run(*o);
  });
}

}  // namespace exactly::cli
