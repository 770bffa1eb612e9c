// `exactly serve`: the OpenAI-compatible HTTP server.
#include "cli/commands.h"
#include "cli/common.h"
#include "server/http_server.h"

namespace exactly::cli {

namespace {

struct ServeOptions {
  ModelOptions model;
  EngineConfig engine;
  server::ServerOptions server;
};

void run(ServeOptions& o) {
  o.engine.threads = o.model.threads;
  o.server.model_path = o.model.model;
  LoadedModel m = load_model(o.model.model, true, o.model.load_options());
  server::serve(m, o.engine, o.server);
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve", "serve the OpenAI completions and chat API over HTTP");
  add_model_options(*cmd, o->model);
  add_chat_template_option(*cmd, o->model);
  add_engine_options(*cmd, o->engine);
  server::ServerOptions& s = o->server;
  cmd->add_option("--host", s.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "TCP port")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", s.api_key, "require 'Authorization: Bearer KEY' on /v1 routes");
  cmd->add_option("--served-model-name", s.served_model_name, "model name in the API (default: the file's name)");
  cmd->add_option("--reasoning-parser", s.reasoning_parser,
                  "chat answers' <think>...</think> as reasoning_content: deepseek_r1 (the template opens <think>) or "
                  "qwen3 (reasoning only where the answer opens it)")
      ->check(CLI::IsMember({"deepseek_r1", "qwen3"}));
  cmd->add_option("--max-body-bytes", s.max_body_bytes, "largest request body; larger ones get 413")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--max-queued-requests", s.max_queued_requests, "waiting requests beyond which new ones get 503")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--http-threads", s.http_threads,
                  "event-loop threads; connections (idle, slow or streaming) hold none")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--parse-threads", s.parse_threads, "threads that parse, render and tokenize request bodies")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--max-connections", s.max_connections,
                  "open connections at most; at the bound the longest-idle one is closed")
      ->capture_default_str()->check(CLI::Range(size_t{1}, size_t{1} << 20));
  cmd->add_option("--header-timeout", s.header_timeout_s,
                  "seconds for a request's headers to arrive (also a kept-alive connection's idle time)")
      ->capture_default_str()->check(CLI::Range(0.05, 3600.0));
  cmd->add_option("--body-timeout", s.body_timeout_s, "seconds for a request's body to arrive after its headers")
      ->capture_default_str()->check(CLI::Range(0.05, 3600.0));
  cmd->add_option("--send-timeout", s.send_timeout_s, "seconds a client may leave one write unread before it is closed")
      ->capture_default_str()->check(CLI::Range(0.05, 3600.0));
  cmd->add_option("--shutdown-timeout", s.shutdown_timeout_s,
                  "on SIGTERM, seconds for streams to end before every connection is closed")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
