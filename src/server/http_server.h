// `exactly serve`: an OpenAI-compatible HTTP server over the batched engine.
// Connections are state on a few event-loop threads (Boost.Beast over Asio),
// not threads: an idle, slow or streaming client costs memory, never a
// thread. Request bodies are parsed, rendered and tokenized on a small pool;
// one engine thread steps the Engine.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine_config.h"
#include "engine/loaded_model.h"

namespace exactly::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;             // empty: no authentication
  std::string served_model_name;   // empty: the model file's name without .gguf
  std::string model_path;          // also accepted as the request's "model"
  std::string reasoning_parser;    // vLLM's --reasoning-parser: deepseek_r1, qwen3, or empty (server/reasoning.h)
  size_t max_body_bytes = 8u << 20;
  size_t max_queued_requests = 256;
  int http_threads = 1;            // event-loop threads; connections are not tied to them
  int parse_threads = 2;           // threads that parse, render and tokenize request bodies
  size_t max_connections = 4096;   // beyond it the longest-idle connection is closed
  size_t max_header_bytes = 16384; // request line and header fields together
  size_t max_header_fields = 100;
  double header_timeout_s = 10;    // a request's headers (or an idle keep-alive connection's next ones)
  double body_timeout_s = 60;      // a request's body, once its headers are in
  double send_timeout_s = 30;      // one write the client does not take
  double shutdown_timeout_s = 5;   // SIGTERM: streams finish, then everything is closed
};

// Serves until SIGINT or SIGTERM, then stops accepting, ends every stream
// with a final "abort" chunk and [DONE] and returns within
// shutdown_timeout_s (plus one engine step). Throws Error when the address
// cannot be bound.
void serve(LoadedModel& model, const EngineConfig& engine_config, const ServerOptions& options);

}  // namespace exactly::server
