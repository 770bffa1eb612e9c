// `exactly serve`: an OpenAI-compatible HTTP server over the batched engine.
// HTTP threads parse and validate; one engine thread steps the Engine.
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
  size_t max_body_bytes = 8u << 20;
  size_t max_queued_requests = 256;
  int http_threads = 128;          // a streaming client holds one for its whole response
};

// Serves until SIGINT or SIGTERM, then stops accepting, aborts what is in
// flight and returns. Throws Error when the address cannot be bound.
void serve(LoadedModel& model, const EngineConfig& engine_config, const ServerOptions& options);

}  // namespace exactly::server
