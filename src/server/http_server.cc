#include "server/http_server.h"

#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>

#include "core/format.h"
#include "engine/engine.h"
#include "server/connection.h"
#include "server/engine_loop.h"
#include "server/listener.h"

namespace exactly::server {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

std::string default_model_name(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name;
}

// Every connection is a descriptor: raise the soft limit to the hard one and
// keep the connection bound under it (with room for the model's files and logs).
size_t connection_bound(size_t wanted) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return wanted;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
  }
  const size_t reserve = 64;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= wanted + reserve) return wanted;
  const size_t bound = lim.rlim_cur > 2 * reserve ? lim.rlim_cur - reserve : lim.rlim_cur / 2;
  std::fprintf(stderr, "exactly serve: %zu connections at most (open file limit %llu)\n", bound,
               static_cast<unsigned long long>(lim.rlim_cur));
  return bound;
}

// SIGTERM / SIGINT: stop accepting, let the engine end every request (streams
// get their "abort" chunk and [DONE]), close connections as their responses
// end, and stop the event loop when none is left or the time is up.
class Shutdown {
 public:
  Shutdown(asio::io_context& io, Listener& listener, EngineLoop& loop, ServerContext& server,
           std::atomic<bool>& stopping)
      : io_(io), listener_(listener), loop_(loop), server_(server), stopping_(stopping), signals_(io, SIGINT, SIGTERM),
        timer_(io) {
    signals_.async_wait([this](error_code ec, int) {
      if (!ec) begin();
    });
  }

 private:
  void begin() {
    std::fprintf(stderr, "exactly serve: stopping\n");
    stopping_.store(true);
    listener_.stop();
    loop_.stop();
    server_.registry.for_each([](Connection& c) { c.stop_when_idle(); });
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(server_.options.shutdown_timeout_s));
    poll();
  }

  void poll() {
    if (server_.registry.size() == 0) return io_.stop();
    if (std::chrono::steady_clock::now() >= deadline_) {
      server_.registry.for_each([](Connection& c) { c.force_close(); });
      timer_.expires_after(std::chrono::milliseconds(100));  // the closes run, then the loop stops
      timer_.async_wait([this](error_code) { io_.stop(); });
      return;
    }
    timer_.expires_after(std::chrono::milliseconds(20));
    timer_.async_wait([this](error_code ec) {
      if (!ec) poll();
    });
  }

  asio::io_context& io_;
  Listener& listener_;
  EngineLoop& loop_;
  ServerContext& server_;
  std::atomic<bool>& stopping_;
  asio::signal_set signals_;
  asio::steady_timer timer_;
  std::chrono::steady_clock::time_point deadline_;
};

// Runs the event loop. A handler that throws (it should not: requests'
// failures are replies) is logged and the loop goes on, so that one
// connection's fault never stops the server.
void run_event_loop(asio::io_context& io) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "exactly serve: internal error in the event loop: %s\n", e.what());
    }
  }
}

}  // namespace

void serve(LoadedModel& model, const EngineConfig& engine_config, const ServerOptions& options) {
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client is a failed write, not a dead server
  ServerOptions o = options;
  o.max_connections = connection_bound(o.max_connections);

  Engine engine(model, engine_config);
  EngineInbox inbox;
  MetricsBoard metrics;
  EngineLoop loop(engine, inbox, metrics);
  std::atomic<bool> stopping{false};
  const std::string name = o.served_model_name.empty() ? default_model_name(o.model_path) : o.served_model_name;
  GrammarCache grammars(*model.tokenizer, model.config().vocab_size, kGrammarCacheBytes);
  const ServedModel served{*model.tokenizer, model.config().vocab_size, engine.max_model_len(), {name, o.model_path},
                           &grammars, parse_reasoning_parser(o.reasoning_parser)};
  const GenerationExchange::Context exchange{inbox, o.max_queued_requests, *model.tokenizer, stopping};
  HttpCounters counters;
  ConnectionRegistry registry;
  asio::thread_pool parse_pool(static_cast<size_t>(o.parse_threads));
  ServerContext server{o, served, exchange, metrics, counters, parse_pool, registry};

  asio::io_context io(o.http_threads);
  Listener listener(io, server);
  Shutdown shutdown(io, listener, loop, server, stopping);
  std::thread engine_thread([&loop] { loop.run(); });
  listener.start();
  std::fprintf(stderr, "exactly serve: model '%s' on http://%s:%d (context %d tokens)\n", name.c_str(),
               o.host.c_str(), o.port, engine.max_model_len());

  std::vector<std::thread> io_threads;
  for (int i = 1; i < o.http_threads; ++i) io_threads.emplace_back([&io] { run_event_loop(io); });
  run_event_loop(io);
  for (std::thread& t : io_threads) t.join();
  // Connections are closed; what the pool still parses finds them so.
  parse_pool.stop();
  parse_pool.join();
  loop.stop();
  engine_thread.join();
}

}  // namespace exactly::server
