// `exactly chat`: an interactive conversation. The whole history is rendered
// with the model's ChatML template each turn; only the tokens after the part
// already in the KV cache are computed.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"

namespace exactly::cli {

namespace {

struct ChatOptions {
  ModelOptions model;
  SamplingParams sampling;
  std::string system;
  int n_predict = 1024;
  int ctx = 4096;
};

struct Message {
  std::string role, content;
};

// The default system prompt a ChatML template inserts when the conversation
// has none (SmolLM2's does), read from the template text itself.
std::string template_default_system(const std::string& tmpl) {
  const std::string open = "<|im_start|>system\n";
  size_t a = tmpl.find(open);
  if (a == std::string::npos) return {};
  a += open.size();
  size_t b = tmpl.find("<|im_end|>", a);
  if (b == std::string::npos) return {};
  std::string s = tmpl.substr(a, b - a);
  return s.find("{{") == std::string::npos && s.find("{%") == std::string::npos ? s : std::string{};
}

std::string render_chatml(const std::vector<Message>& msgs) {
  std::string out;
  for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  return out + "<|im_start|>assistant\n";
}

void run(const ChatOptions& o) {
  LoadedModel m = load_model(o.model.model, true);
  const Tokenizer& tok = *m.tokenizer;
  const std::string& tmpl = tok.chat_template();
  if (!tmpl.empty() && tmpl.find("<|im_start|>") == std::string::npos)
    std::fprintf(stderr, "note: the model's chat template is not ChatML; using ChatML anyway\n");

  std::vector<Message> history;
  std::string system = o.system.empty() ? template_default_system(tmpl) : o.system;
  if (!system.empty()) history.push_back({"system", system});

  const int32_t ctx = std::min(o.ctx, m.config().context_length);
  ThreadPool pool(o.model.resolved_threads());
  Generator gen(*m.model, pool, ctx);
  Sampler sampler(o.sampling);
  const bool tty = isatty(STDIN_FILENO);
  std::fprintf(stderr, "chatting with %s (context %d tokens); end with Ctrl-D or /exit, /reset clears history\n",
               m.config().name.c_str(), ctx);
  std::string line;
  for (;;) {
    if (tty) std::fprintf(stdout, "\n> "), std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history.resize(system.empty() ? 0 : 1);
      gen.reset();
      std::fprintf(stderr, "history cleared\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({"user", line});

    std::vector<int32_t> ids;
    if (tok.add_bos() && tok.bos_id()) ids.push_back(*tok.bos_id());
    auto body = tok.encode(render_chatml(history), true);
    ids.insert(ids.end(), body.begin(), body.end());
    if (static_cast<int32_t>(ids.size()) >= ctx) {
      std::fprintf(stderr, "the conversation (%zu tokens) no longer fits the context of %d; use /reset\n",
                   ids.size(), ctx);
      history.pop_back();
      continue;
    }
    // Reuse the cached prefix: recompute only from the first differing token.
    size_t common = 0;
    while (common < ids.size() && common < gen.tokens().size() && ids[common] == gen.tokens()[common]) ++common;
    if (common == ids.size()) --common;  // at least one token must be computed to get logits
    gen.truncate(static_cast<int32_t>(common));
    std::span<const int32_t> fresh(ids.data() + common, ids.size() - common);

    StreamingDetokenizer detok(tok);
    std::string reply;
    const int32_t room = ctx - static_cast<int32_t>(ids.size());
    GenerationStats s = generate(
        gen, sampler, fresh, std::min(o.n_predict, room), [&](int32_t id) { return tok.is_end_of_generation(id); },
        [&](int32_t id) {
          std::string piece = detok.push(id);
          reply += piece;
          std::fwrite(piece.data(), 1, piece.size(), stdout);
          std::fflush(stdout);
        });
    std::string rest = detok.flush();
    reply += rest;
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    history.push_back({"assistant", reply});
    if (tty)
      std::fprintf(stderr, "[%d tokens, %.1f tokens/s]\n", s.generated_tokens,
                   s.generated_tokens / std::max(s.generate_seconds, 1e-9));
  }
}

}  // namespace

void register_chat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "interactive chat with the model's ChatML template");
  add_model_options(*cmd, o->model);
  cmd->add_option("--system", o->system, "system prompt (default: the template's own, if any)");
  cmd->add_option("-n,--n-predict", o->n_predict, "most tokens per reply")->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx, "context size")->capture_default_str()->check(CLI::PositiveNumber);
  add_sampling_options(*cmd, o->sampling);
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
