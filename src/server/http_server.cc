#include "server/http_server.h"

#include <sys/socket.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/format.h"
#include "engine/engine.h"
#include "server/api_error.h"
#include "server/engine_loop.h"
#include "server/generation_handler.h"
#include "server/metrics.h"

namespace exactly::server {

using nlohmann::json;

namespace {

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.to_json().dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

std::string default_model_name(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

// Routes and their guards: authentication before routing, OpenAI-shaped
// errors for everything that fails (including cpp-httplib's own 404 and 413).
void install_routes(httplib::Server& svr, const ServerOptions& o, const GenerationContext& ctx,
                    const MetricsBoard& metrics, int32_t max_model_len) {
  svr.set_pre_routing_handler([&o](const httplib::Request& req, httplib::Response& res) {
    if (o.api_key.empty() || !req.path.starts_with("/v1/")) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + o.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError{401, "a valid API key is required: send 'Authorization: Bearer KEY'",
                             "invalid_request_error", "", "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  // Called for every response of status >= 400; only fills an empty body.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([&o](const httplib::Request& req,
                                                                 httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 413)
      send_error(res, ApiError{413, strformat("the request body is larger than %zu bytes", o.max_body_bytes),
                               "invalid_request_error", "", "request_too_large"});
    else if (res.status == 404)
      send_error(res, ApiError{404, "no route for " + req.method + " " + req.path, "invalid_request_error", "", ""});
    else
      send_error(res, ApiError{res.status, strformat("HTTP error %d", res.status), "invalid_request_error", "", ""});
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, ApiError{500, e.what(), "server_error", "", ""});
    } catch (...) {
      send_error(res, ApiError{500, "unknown error", "server_error", "", ""});
    }
  });

  auto generation = [&ctx](Endpoint endpoint) {
    return [&ctx, endpoint](const httplib::Request& req, httplib::Response& res) {
      try {
        handle_generation(endpoint, req, res, ctx);
      } catch (const ApiError& e) {
        send_error(res, e);
      }
    };
  };
  svr.Post("/v1/completions", generation(Endpoint::kCompletions));
  svr.Post("/v1/chat/completions", generation(Endpoint::kChat));
  svr.Get("/v1/models", [&ctx, max_model_len](const httplib::Request&, httplib::Response& res) {
    json model = {{"id", ctx.model_names.front()}, {"object", "model"}, {"created", std::time(nullptr)},
                  {"owned_by", "exactly"}, {"max_model_len", max_model_len}};
    res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(), "application/json");
  });
  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  svr.Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.read().prometheus_text(), "text/plain; version=0.0.4");
  });
}

}  // namespace

void serve(LoadedModel& model, const EngineConfig& engine_config, const ServerOptions& o) {
  // Signals are taken synchronously by one thread (below), so every thread
  // created from here on must have them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client is a failed write, not a dead server

  Engine engine(model, engine_config);
  EngineInbox inbox;
  MetricsBoard metrics;
  EngineLoop loop(engine, inbox, metrics);
  const std::string name = o.served_model_name.empty() ? default_model_name(o.model_path) : o.served_model_name;
  const GenerationContext ctx{*model.tokenizer, model.config().vocab_size, engine.max_model_len(),
                              {name, o.model_path}, inbox, o.max_queued_requests};

  httplib::Server svr;
  const int http_threads = o.http_threads;
  svr.new_task_queue = [http_threads] { return new httplib::ThreadPool(static_cast<size_t>(http_threads)); };
  svr.set_payload_max_length(o.max_body_bytes);
  // The library listens with a backlog of 5 connections: a burst of clients
  // connecting at once overflows it and some see their connection reset.
  // Remember the listening socket (keeping the library's SO_REUSEADDR) and
  // widen its backlog once it is bound.
  int listen_fd = -1;
  svr.set_socket_options([&listen_fd](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;
  });
  install_routes(svr, o, ctx, metrics, engine.max_model_len());
  if (!svr.bind_to_port(o.host, o.port))
    throw Error(strformat("cannot listen on %s:%d", o.host.c_str(), o.port), ExitCode::kUsage);
  if (listen_fd >= 0) ::listen(listen_fd, SOMAXCONN);

  std::thread engine_thread([&loop] { loop.run(); });
  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    const timespec poll{0, 200'000'000};
    while (!done.load()) {
      if (sigtimedwait(&signals, nullptr, &poll) < 0) continue;
      std::fprintf(stderr, "exactly serve: stopping\n");
      // Abort in-flight requests first so their handlers finish, then stop
      // the listener, whose shutdown waits for the handler threads.
      loop.stop();
      svr.stop();
      return;
    }
  });
  std::fprintf(stderr, "exactly serve: model '%s' on http://%s:%d (context %d tokens)\n", name.c_str(),
               o.host.c_str(), o.port, engine.max_model_len());
  svr.listen_after_bind();
  done.store(true);
  loop.stop();
  signal_thread.join();
  engine_thread.join();
}

}  // namespace exactly::server
