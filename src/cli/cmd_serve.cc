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
  add_engine_options(*cmd, o->engine);
  server::ServerOptions& s = o->server;
  cmd->add_option("--host", s.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", s.port, "TCP port")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", s.api_key, "require 'Authorization: Bearer KEY' on /v1 routes");
  cmd->add_option("--served-model-name", s.served_model_name, "model name in the API (default: the file's name)");
  cmd->add_option("--max-body-bytes", s.max_body_bytes, "largest request body; larger ones get 413")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--max-queued-requests", s.max_queued_requests, "waiting requests beyond which new ones get 503")
      ->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--http-threads", s.http_threads, "connections served at once (each stream holds one)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
