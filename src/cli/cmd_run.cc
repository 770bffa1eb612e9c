// `exactly run`: generate a continuation of one prompt, or with --chat the
// answer to it as a user message rendered through the model's chat template.
// The generated text alone goes to stdout, streamed as it decodes; timings go
// to stderr.
#include <chrono>
#include <cstdio>
#include <fstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "server/chat_prompt.h"

namespace exactly::cli {

namespace {

struct RunOptions {
  ModelOptions model;
  EngineConfig engine;
  SamplingParams sampling;
  std::string prompt;
  std::string prompt_file;
  std::string prompt_ids;
  std::string ids_out;
  int n_predict = 256;
  int ctx = 0;
  bool no_bos = false;
  bool no_parse_special = false;
  bool chat = false;
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

// The prompt's tokens: given ids as they are; text as raw text (BOS added
// when the model asks), or with --chat as one user message through the
// model's chat template when it has one.
std::vector<int32_t> prompt_tokens(const RunOptions& o, const Tokenizer& tok) {
  if (!o.prompt_ids.empty()) return parse_token_list(o.prompt_ids, "--prompt-ids");
  const std::string text = o.prompt_file.empty() ? o.prompt : read_file(o.prompt_file);
  if (o.chat && !tok.chat_template().empty()) {
    const nlohmann::json message = {{"role", "user"}, {"content", text}};
    return server::chat_prompt_tokens(nlohmann::json::array({message}), tok);
  }
  if (o.chat) std::fprintf(stderr, "the model has no chat template: continuing the raw text\n");
  std::vector<int32_t> prompt;
  if (tok.add_bos() && tok.bos_id() && !o.no_bos) prompt.push_back(*tok.bos_id());
  auto ids = tok.encode(text, !o.no_parse_special);
  prompt.insert(prompt.end(), ids.begin(), ids.end());
  return prompt;
}

void run(const RunOptions& o) {
  if (!o.model.chat_template.empty() && !o.chat)
    throw Error("--chat-template applies to --chat only (a raw prompt is not rendered)", ExitCode::kUsage);
  LoadedModel m = load_model(o.model.model, true, o.model.load_options());
  const Tokenizer& tok = *m.tokenizer;

  const std::vector<int32_t> prompt = prompt_tokens(o, tok);
  if (prompt.empty()) throw Error("the prompt is empty", ExitCode::kUsage);
  for (int32_t id : prompt)
    if (id >= m.config().vocab_size)
      throw Error(strformat("prompt token id %d is outside the vocabulary (%d tokens)", id, m.config().vocab_size),
                  ExitCode::kUsage);

  const int32_t model_ctx = m.config().context_length;
  const int32_t ctx = o.ctx > 0 ? std::min(o.ctx, model_ctx) : model_ctx;
  if (static_cast<int32_t>(prompt.size()) >= ctx)
    throw Error(strformat("the prompt has %zu tokens but the context holds %d", prompt.size(), ctx),
                ExitCode::kUsage);
  const int32_t room = ctx - static_cast<int32_t>(prompt.size());
  const int32_t n_predict = o.n_predict < 0 ? room : std::min(o.n_predict, room);
  if (n_predict <= 0) throw Error("-n must be positive (or -1 for the rest of the context)", ExitCode::kUsage);

  // One request through the same engine as `batch` and `serve`, so a seeded
  // request gives the same tokens from all three.
  EngineConfig config = o.engine;
  config.threads = o.model.threads;
  config.max_model_len = ctx;
  Engine engine(m, config);
  RequestParams params;
  params.prompt = prompt;
  params.sampling = o.sampling;
  params.max_tokens = n_predict;
  engine.add_request(params);

  std::vector<int32_t> generated;
  const auto t0 = std::chrono::steady_clock::now();
  double first_token = 0;
  std::string finish = "length";
  while (engine.has_unfinished()) {
    for (const RequestOutput& out : engine.step()) {
      for (const CompletionDelta& d : out.completions) {
        if (!d.token_ids.empty() && generated.empty())
          first_token = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        generated.insert(generated.end(), d.token_ids.begin(), d.token_ids.end());
        std::fwrite(d.text.data(), 1, d.text.size(), stdout);
        std::fflush(stdout);
        if (d.finish_reason) finish = to_string(*d.finish_reason);
      }
    }
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!o.ids_out.empty()) write_ids_json(o.ids_out, prompt, generated);

  const double gen_seconds = total - first_token;
  std::fprintf(stderr,
               "\nprompt: %zu tokens, first token after %.3f s; generated: %zu tokens in %.3f s (%.1f tokens/s after the first); "
               "finish: %s; threads: %d\n",
               prompt.size(), first_token, generated.size(), total,
               generated.size() > 1 ? static_cast<double>(generated.size() - 1) / std::max(gen_seconds, 1e-9) : 0.0,
               finish.c_str(), engine.config().threads);
  const EngineStats& s = engine.stats();
  if (!engine.config().spec_method.empty())
    std::fprintf(stderr, "speculation (%s): %lld drafted, %lld accepted (%.2f), %.2f accepted per verify, %.3f s drafting\n",
                 engine.config().spec_method.c_str(), static_cast<long long>(s.spec_drafted_tokens),
                 static_cast<long long>(s.spec_accepted_tokens),
                 s.spec_drafted_tokens > 0 ? static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_drafted_tokens) : 0.0,
                 s.spec_verifies > 0 ? static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_verifies) : 0.0,
                 s.spec_draft_seconds);
}

}  // namespace

void register_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "generate a continuation of a prompt");
  add_model_options(*cmd, o->model);
  add_chat_template_option(*cmd, o->model);
  add_engine_options(*cmd, o->engine);
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "prompt text (special-token text is recognised)");
  auto* f = cmd->add_option("-f,--file", o->prompt_file, "read the prompt from a file");
  auto* ids = cmd->add_option("--prompt-ids", o->prompt_ids, "prompt as token ids (\"1,2,3\"), used as given");
  p->excludes(f)->excludes(ids);
  f->excludes(ids);
  cmd->add_option("-n,--n-predict", o->n_predict, "tokens to generate (-1: until the context is full)")
      ->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx, "context size (0: the model's)")->check(CLI::NonNegativeNumber);
  auto* no_bos = cmd->add_flag("--no-bos", o->no_bos, "do not add the BOS token even when the model asks for it");
  auto* no_special = cmd->add_flag("--no-parse-special", o->no_parse_special,
                                   "treat special-token text in the prompt as plain text");
  cmd->add_flag("--chat", o->chat,
                "answer the prompt as a user message through the model's chat template (raw text when it has none)")
      ->excludes(ids)->excludes(no_bos)->excludes(no_special);
  cmd->add_option("--ids-out", o->ids_out, "write prompt and generated token ids as JSON to this file");
  add_sampling_options(*cmd, o->sampling);
  cmd->callback([o, cmd, p, f, ids] {
    if (p->count() + f->count() + ids->count() == 0) throw CLI::RequiredError("--prompt, --file or --prompt-ids");
    (void)cmd;
    run(*o);
  });
}

}  // namespace exactly::cli
