// `exactly chat`: an interactive conversation. Each turn renders the whole
// history with the model's own chat template and runs it through the batched
// engine, whose prefix cache finds the earlier turns' KV, so only the new
// tokens are computed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace exactly::cli {

namespace {

// Used when a model has no chat template of its own.
constexpr const char* kChatMLTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

struct ChatOptions {
  ModelOptions model;
  EngineConfig engine;
  SamplingParams sampling;
  std::string system;
  int n_predict = 1024;
  int ctx = 4096;
};

std::string token_text(const Tokenizer& tok, std::optional<int32_t> id) {
  return id ? tok.token_bytes(*id, true) : std::string{};
}

void run(const ChatOptions& o) {
  LoadedModel m = load_model(o.model.model, true, o.model.load_options());
  const Tokenizer& tok = *m.tokenizer;
  const std::string tmpl = tok.chat_template().empty() ? std::string(kChatMLTemplate) : tok.chat_template();
  const std::string bos = token_text(tok, tok.bos_id()), eos = token_text(tok, tok.eos_id());

  EngineConfig config = o.engine;
  config.threads = o.model.threads;
  config.max_model_len = std::min(o.ctx, m.config().context_length);
  Engine engine(m, config);

  nlohmann::json history = nlohmann::json::array();
  if (!o.system.empty()) history.push_back({{"role", "system"}, {"content", o.system}});
  const bool tty = isatty(STDIN_FILENO);
  std::fprintf(stderr, "chatting with %s (context %d tokens); end with Ctrl-D or /exit, /reset clears history\n",
               m.config().name.c_str(), config.max_model_len);
  std::string line;
  for (;;) {
    if (tty) std::fprintf(stdout, "\n> "), std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history.erase(history.begin() + (o.system.empty() ? 0 : 1), history.end());
      std::fprintf(stderr, "history cleared\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({{"role", "user"}, {"content", line}});

    RequestParams params;
    params.prompt = tok.encode(render_chat_template(tmpl, history, true, bos, eos), true);
    const int64_t room = config.max_model_len - static_cast<int64_t>(params.prompt.size());
    if (room < 1) {
      std::fprintf(stderr, "the conversation (%zu tokens) no longer fits the context of %d; use /reset\n",
                   params.prompt.size(), config.max_model_len);
      history.erase(history.end() - 1);
      continue;
    }
    params.sampling = o.sampling;
    params.max_tokens = std::min<int64_t>(o.n_predict, room);
    engine.add_request(params);
    std::string reply;
    int64_t generated = 0, cached = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (engine.has_unfinished()) {
      for (const RequestOutput& out : engine.step()) {
        cached = out.cached_prompt_tokens;
        for (const CompletionDelta& d : out.completions) {
          generated += static_cast<int64_t>(d.token_ids.size());
          reply += d.text;
          std::fwrite(d.text.data(), 1, d.text.size(), stdout);
          std::fflush(stdout);
        }
      }
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);
    history.push_back({{"role", "assistant"}, {"content", reply}});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[%lld tokens in %.2f s; %lld of %zu prompt tokens from the cache]\n",
                 static_cast<long long>(generated), seconds, static_cast<long long>(cached), params.prompt.size());
  }
}

}  // namespace

void register_chat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  CLI::App* cmd = app.add_subcommand("chat", "interactive chat with the model's own chat template");
  add_model_options(*cmd, o->model);
  add_chat_template_option(*cmd, o->model);
  add_engine_options(*cmd, o->engine);
  cmd->add_option("--system", o->system, "system prompt (default: whatever the template adds)");
  cmd->add_option("-n,--n-predict", o->n_predict, "most tokens per reply")->capture_default_str();
  cmd->add_option("-c,--ctx", o->ctx, "context size")->capture_default_str()->check(CLI::PositiveNumber);
  add_sampling_options(*cmd, o->sampling);
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
