// `exactly run`: generate a continuation of one prompt. The generated text
// alone goes to stdout, streamed as it decodes; timings go to stderr.
#include <chrono>
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"

namespace exactly::cli {

namespace {

struct RunOptions {
  ModelOptions model;
  SamplingParams sampling;
  std::string prompt;
  std::string prompt_file;
  std::string prompt_ids;
  std::string ids_out;
  int n_predict = 256;
  int ctx = 0;
  bool no_bos = false;
  bool no_parse_special = false;
};

void write_ids_json(const std::string& path, const std::vector<int32_t>& prompt,
                    const std::vector<int32_t>& ids) {
  std::ofstream out(path);
  if (!out) throw Error(strformat("cannot write %s", path.c_str()));
  auto list = [&](const std::vector<int32_t>& v) {
    out << '[';
    for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
    out << ']';
  };
  out << "{\"prompt_ids\": ";
  list(prompt);
  out << ", \"ids\": ";
  list(ids);
  out << "}\n";
}

void run(const RunOptions& o) {
  LoadedModel m = load_model(o.model.model, true);
  const Tokenizer& tok = *m.tokenizer;

  std::vector<int32_t> prompt;
  if (!o.prompt_ids.empty()) {
    prompt = parse_token_list(o.prompt_ids, "--prompt-ids");
  } else {
    std::string text = o.prompt_file.empty() ? o.prompt : read_file(o.prompt_file);
    if (tok.add_bos() && tok.bos_id() && !o.no_bos) prompt.push_back(*tok.bos_id());
    auto ids = tok.encode(text, !o.no_parse_special);
    prompt.insert(prompt.end(), ids.begin(), ids.end());
  }
  if (prompt.empty()) throw Error("the prompt is empty", ExitCode::kUsage);
  for (int32_t id : prompt)
    if (id >= m.config().vocab_size)
      throw Error(strformat("prompt token id %d is outside the vocabulary (%d tokens)", id, m.config().vocab_size),
                  ExitCode::kUsage);

  const int32_t model_ctx = m.config().context_length;
  const int32_t ctx = o.ctx > 0 ? std::min(o.ctx, model_ctx) : model_ctx;
  if (static_cast<int32_t>(prompt.size()) > ctx)
    throw Error(strformat("the prompt has %zu tokens but the context holds %d", prompt.size(), ctx),
                ExitCode::kUsage);
  const int32_t room = ctx - static_cast<int32_t>(prompt.size());
  const int32_t n_predict = o.n_predict < 0 ? room : std::min(o.n_predict, room);
  // Size the KV pool for what this run can use, not for the model's full context.
  const int32_t needed = static_cast<int32_t>(prompt.size()) + n_predict;

  ThreadPool pool(o.model.resolved_threads());
  Generator gen(*m.model, pool, std::max(needed, 1));
  Sampler sampler(o.sampling);
  StreamingDetokenizer detok(tok);
  std::vector<int32_t> generated;
  GenerationStats s = generate(
      gen, sampler, prompt, n_predict, [&](int32_t id) { return tok.is_end_of_generation(id); },
      [&](int32_t id) {
        generated.push_back(id);
        std::string piece = detok.push(id);
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      });
  std::string rest = detok.flush();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!o.ids_out.empty()) write_ids_json(o.ids_out, prompt, generated);

  const char* why = s.stop == StopReason::kEndOfGeneration ? "end of generation"
                    : s.stop == StopReason::kContextFull    ? "context full"
                                                            : "max tokens";
  std::fprintf(stderr, "\nprompt: %d tokens in %.3f s (%.1f tokens/s); generated: %d tokens in %.3f s (%.1f tokens/s); stop: %s; threads: %d\n",
               s.prompt_tokens, s.prompt_seconds, s.prompt_tokens / std::max(s.prompt_seconds, 1e-9),
               s.generated_tokens, s.generate_seconds,
               s.generated_tokens > 1 ? (s.generated_tokens - 1) / std::max(s.generate_seconds, 1e-9) : 0.0, why,
               pool.size());
}

}  // namespace

void register_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "generate a continuation of a prompt");
  add_model_options(*cmd, o->model);
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "prompt text (special-token text is recognised)");
  auto* f = cmd->add_option("-f,--file", o->prompt_file, "read the prompt from a file");
  auto* ids = cmd->add_option("--prompt-ids", o->prompt_ids, "prompt as token ids (\"1,2,3\"), used as given");
  p->excludes(f)->excludes(ids);
  f->excludes(ids);
  cmd->add_option("-n,--n-predict", o->n_predict, "tokens to generate (-1: until the context is full)")
      ->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx, "context size (0: the model's)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-bos", o->no_bos, "do not add the BOS token even when the model asks for it");
  cmd->add_flag("--no-parse-special", o->no_parse_special, "treat special-token text in the prompt as plain text");
  cmd->add_option("--ids-out", o->ids_out, "write prompt and generated token ids as JSON to this file");
  add_sampling_options(*cmd, o->sampling);
  cmd->callback([o, cmd, p, f, ids] {
    if (p->count() + f->count() + ids->count() == 0) throw CLI::RequiredError("--prompt, --file or --prompt-ids");
    (void)cmd;
    run(*o);
  });
}

}  // namespace exactly::cli
