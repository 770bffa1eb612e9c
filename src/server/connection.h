// One client connection, as state on the event loop: read a request's
// headers and body under deadlines and limits, route it, answer it (a
// generation through a GenerationExchange, parsed on the parse pool), then
// read the next one or close. Every handler runs on the connection's strand.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "server/generation_exchange.h"
#include "server/http_response.h"
#include "server/routes.h"
#include "server/server_context.h"

namespace exactly::server {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(boost::asio::ip::tcp::socket socket, ServerContext& server, uint64_t id);
  ~Connection();

  uint64_t id() const { return id_; }
  // Whether it waits for a request's headers (idle or slow): eviction takes those first.
  bool awaiting_request() const { return phase_.load() == Phase::kAwaitingRequest && !close_requested_.load(); }

  // Any thread: posted to the connection's strand.
  void start();
  // Shutdown: close now when no request is being answered, else once its response is sent.
  void stop_when_idle();
  void force_close();

 private:
  enum class Phase { kAwaitingRequest, kReadingBody, kAnswering, kClosing, kClosed };
  enum class After { kExchange, kFinish, kReadBody, kClose };
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

  void read_header();
  void on_header(boost::system::error_code ec);
  bool check_header();
  void read_body();
  void on_body(boost::system::error_code ec);
  void refuse_framing(boost::system::error_code ec);
  void dispatch();
  void start_generation(Endpoint endpoint);
  // Answers with what `answer` makes of the body, on the parse pool.
  void start_on_parse_pool(HttpReply (*answer)(std::string_view, const ServedModel&));
  void on_parsed(std::optional<GenerationRequest> request, const ApiError& error);
  void wake();
  void pump();
  void tick();
  void reply(const HttpReply& reply, bool keep_alive);
  void send(std::string bytes, After after);
  void on_sent(boost::system::error_code ec, After after);
  void watch_peer();
  void on_peer_readable(boost::system::error_code ec, unsigned epoch);
  void finish_response();
  void linger_close();
  void close();
  void arm_deadline(double seconds);
  void disarm_deadline();

  ServerContext& server_;
  const uint64_t id_;
  const boost::asio::any_io_executor executor_;  // the connection's strand
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer deadline_;        // reading a request, or lingering before close
  boost::asio::steady_timer send_deadline_;   // the write in flight
  boost::asio::steady_timer tick_timer_;      // once a second while a generation runs
  boost::beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  std::unique_ptr<GenerationExchange> exchange_;
  std::string out_;                           // the bytes being written
  std::string request_id_;
  std::unique_ptr<char[]> discard_;           // lingering close: what the client still sends
  std::atomic<Phase> phase_{Phase::kAwaitingRequest};
  std::atomic<bool> wake_pending_{false};
  std::atomic<bool> close_requested_{false};
  bool writing_ = false, watching_ = false, keep_alive_ = false, stopping_ = false, timed_out_ = false;
  unsigned watch_epoch_ = 0, deadline_epoch_ = 0, send_epoch_ = 0;
};

}  // namespace exactly::server
