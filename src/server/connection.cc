#include "server/connection.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>

#include "core/format.h"
#include "server/tokenize_request.h"

namespace exactly::server {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

namespace {

// How long a closing connection reads and drops what its client still sends,
// so that the client reads our last response before it sees the connection
// reset (closing with unread data sends a reset).
constexpr double kLingerSeconds = 2;
constexpr size_t kDiscardBytes = 4096;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

Connection::Connection(asio::ip::tcp::socket socket, ServerContext& server, uint64_t id)
    : server_(server),
      id_(id),
      executor_(socket.get_executor()),
      socket_(std::move(socket)),
      deadline_(executor_),
      send_deadline_(executor_),
      tick_timer_(executor_),
      // Room for the largest header plus one read of body or pipelined request.
      buffer_(server.options.max_header_bytes + 65536) {
  ++server_.counters.connections_open;
  ++server_.counters.connections_total;
}

Connection::~Connection() { --server_.counters.connections_open; }

void Connection::start() {
  asio::dispatch(executor_, [self = shared_from_this()] { self->read_header(); });
}

void Connection::stop_when_idle() {
  asio::post(executor_, [self = shared_from_this()] {
    self->stopping_ = true;
    const Phase p = self->phase_.load();
    if (p == Phase::kAwaitingRequest || p == Phase::kReadingBody) self->close();
  });
}

void Connection::force_close() {
  close_requested_ = true;
  asio::post(executor_, [self = shared_from_this()] { self->close(); });
}

// ---- reading a request ----

// A timer's handler may already be queued when its operation completes, so
// each handler checks that its epoch is still the current one.
void Connection::arm_deadline(double s) {
  timed_out_ = false;
  deadline_.expires_after(seconds(s));
  deadline_.async_wait([self = shared_from_this(), epoch = ++deadline_epoch_](error_code ec) {
    if (ec || epoch != self->deadline_epoch_ || self->phase_.load() == Phase::kClosed) return;
    // The pending read completes with operation_aborted and sees timed_out_.
    self->timed_out_ = true;
    error_code ignored;
    self->socket_.cancel(ignored);
  });
}

void Connection::read_header() {
  if (stopping_) return close();
  phase_ = Phase::kAwaitingRequest;
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
  parser_->body_limit(server_.options.max_body_bytes);
  arm_deadline(server_.options.header_timeout_s);
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
}

void Connection::disarm_deadline() {
  ++deadline_epoch_;
  deadline_.cancel();
}

void Connection::on_header(error_code ec) {
  disarm_deadline();
  if (phase_.load() == Phase::kClosed) return;
  if (ec) {
    // An idle keep-alive connection that ends or times out before a byte of
    // its next request is simply closed.
    const bool nothing_read = buffer_.size() == 0 && !parser_->got_some();
    if (timed_out_) ++server_.counters.timeouts_total;
    if (ec == http::error::end_of_stream || nothing_read) return close();
    return refuse_framing(ec);
  }
  const int64_t request_number = ++server_.counters.requests_total;
  phase_ = Phase::kReadingBody;
  request_id_ = strformat("%llx-%llx", static_cast<unsigned long long>(id_),
                          static_cast<unsigned long long>(request_number));
  keep_alive_ = parser_->get().keep_alive();
  if (!check_header()) return;
  if (parser_->is_done()) return dispatch();
  if (boost::beast::iequals(parser_->get()[http::field::expect], "100-continue"))
    return send(std::string(continue_response()), After::kReadBody);
  read_body();
}

// What can be refused from the headers alone. A refusal before the body is
// read closes the connection, since the body's bytes would follow.
bool Connection::check_header() {
  const auto& req = parser_->get();
  size_t fields = 0;
  for (auto it = req.begin(); it != req.end(); ++it) ++fields;
  auto refuse = [&](const HttpReply& r) {
    ++server_.counters.refused_total;
    reply(r, false);
    return false;
  };
  if (fields > server_.options.max_header_fields)
    return refuse(error_reply(ApiError{431, strformat("a request may carry at most %zu header fields, this one has %zu",
                                                      server_.options.max_header_fields, fields),
                                       "invalid_request_error", "", "too_many_headers"}));
  // RFC 9112 6.3: a request whose transfer coding is not chunked has no
  // knowable length.
  if (req.count(http::field::transfer_encoding) && !parser_->chunked())
    return refuse(error_reply(ApiError{400, "the only transfer coding accepted is 'chunked'",
                                       "invalid_request_error", "", ""}));
  if (req.version() != 11 && req.version() != 10)
    return refuse(error_reply(ApiError{505, "only HTTP/1.0 and HTTP/1.1 are served", "invalid_request_error", "", ""}));
  const std::string_view target(req.target().data(), req.target().size());
  const auto auth = req[http::field::authorization];
  if (!authorized(target, std::string_view(auth.data(), auth.size()), server_.options.api_key)) {
    reply(unauthorized_reply(), keep_alive_ && parser_->is_done());
    return false;
  }
  return true;
}

void Connection::read_body() {
  arm_deadline(server_.options.body_timeout_s);
  http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
    self->disarm_deadline();
    if (self->phase_.load() == Phase::kClosed) return;
    if (ec) return self->refuse_framing(ec);
    self->dispatch();
  });
}

// A request that could not be read: say why when the client can still hear it.
void Connection::refuse_framing(error_code ec) {
  ++server_.counters.refused_total;
  const auto& o = server_.options;
  if (timed_out_) {
    const double limit = parser_->is_header_done() ? o.body_timeout_s : o.header_timeout_s;
    return reply(error_reply(ApiError{408, strformat("the request did not arrive within %g s", limit),
                                      "invalid_request_error", "", "timeout"}),
                 false);
  }
  if (ec == http::error::body_limit)
    return reply(error_reply(ApiError{413, strformat("the request body is larger than %zu bytes", o.max_body_bytes),
                                      "invalid_request_error", "", "request_too_large"}),
                 false);
  if (ec == http::error::header_limit)
    return reply(error_reply(ApiError{431, strformat("the request's headers are larger than %zu bytes",
                                                     o.max_header_bytes),
                                      "invalid_request_error", "", "headers_too_large"}),
                 false);
  const bool malformed = ec.category() == http::make_error_code(http::error::bad_method).category() &&
                         ec != http::error::partial_message && ec != http::error::end_of_stream;
  if (malformed)
    return reply(error_reply(ApiError{400, "malformed HTTP request: " + ec.message(), "invalid_request_error", "", ""}),
                 false);
  close();  // the peer went away or the socket failed
}

// ---- answering ----

void Connection::dispatch() {
  phase_ = Phase::kAnswering;
  const auto& req = parser_->get();
  const std::string method(req.method_string());
  const std::string target(req.target());
  const Route route = find_route(method, target);
  const bool keep = keep_alive_ && !stopping_;
  switch (route) {
    case Route::kChatPage: return reply(chat_page_reply(), keep);
    case Route::kHealth: return reply(health_reply(), keep);
    case Route::kMetrics: return reply(metrics_reply(server_.metrics, server_.counters, server_.model.grammars,
                                                         server_.model.names.front()), keep);
    case Route::kModels: return reply(models_reply(server_.model.names.front(), server_.model.max_model_len), keep);
    case Route::kCompletions: return start_generation(Endpoint::kCompletions);
    case Route::kChat: return start_generation(Endpoint::kChat);
    case Route::kTokenize: return start_on_parse_pool(tokenize_reply);
    case Route::kDetokenize: return start_on_parse_pool(detokenize_reply);
    case Route::kWrongMethod:
    case Route::kNotFound: return reply(no_route_reply(route, method, target), keep);
  }
}

void Connection::start_generation(Endpoint endpoint) {
  std::string body = std::move(parser_->get().body());
  parser_.reset();
  watch_peer();
  asio::post(server_.parse_pool, [self = shared_from_this(), endpoint, body = std::move(body)] {
    std::optional<GenerationRequest> request;
    ApiError error;
    try {
      request = parse_generation_request(endpoint, body, self->server_.model);
    } catch (const ApiError& e) {
      error = e;
    } catch (const std::exception& e) {
      ++self->server_.counters.server_errors_total;
      std::fprintf(stderr, "exactly serve: request %s failed: %s\n", self->request_id_.c_str(), e.what());
      error = ApiError{500, std::string("internal error: ") + e.what(), "server_error", "", ""};
    }
    asio::post(self->executor_, [self, request = std::move(request), error]() mutable {
      self->on_parsed(std::move(request), error);
    });
  });
}

void Connection::start_on_parse_pool(HttpReply (*answer)(std::string_view, const ServedModel&)) {
  std::string body = std::move(parser_->get().body());
  parser_.reset();
  asio::post(server_.parse_pool, [self = shared_from_this(), answer, body = std::move(body)] {
    HttpReply r = answer(body, self->server_.model);
    asio::post(self->executor_, [self, r = std::move(r)] {
      if (self->phase_.load() == Phase::kClosed) return;
      self->reply(r, self->keep_alive_ && !self->stopping_);
    });
  });
}

void Connection::on_parsed(std::optional<GenerationRequest> request, const ApiError& error) {
  if (phase_.load() == Phase::kClosed) return;
  const bool keep = keep_alive_ && !stopping_;
  if (!request) return reply(error_reply(error), keep);
  try {
    std::weak_ptr<Connection> weak = weak_from_this();
    exchange_ = std::make_unique<GenerationExchange>(
        std::move(*request), server_.exchange, [weak] { if (auto c = weak.lock()) c->wake(); }, keep, request_id_);
  } catch (const ApiError& e) {
    return reply(error_reply(e), keep);
  }
  tick();
  pump();
}

// Engine thread: one post per burst of outputs, however many arrive.
void Connection::wake() {
  if (wake_pending_.exchange(true)) return;
  asio::post(executor_, [self = shared_from_this()] {
    self->wake_pending_ = false;
    self->pump();
  });
}

void Connection::pump() {
  if (!exchange_ || writing_ || phase_.load() == Phase::kClosed) return;
  std::string bytes = exchange_->take_output();
  if (!bytes.empty()) send(std::move(bytes), After::kExchange);
}

void Connection::tick() {
  tick_timer_.expires_after(std::chrono::seconds(1));
  tick_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (ec || !self->exchange_ || self->phase_.load() == Phase::kClosed) return;
    if (!self->writing_) {
      std::string bytes = self->exchange_->tick();
      if (!bytes.empty()) self->send(std::move(bytes), After::kExchange);
    }
    self->tick();
  });
}

void Connection::reply(const HttpReply& r, bool keep_alive) {
  phase_ = Phase::kAnswering;
  keep_alive_ = keep_alive;
  if (r.status == 500) ++server_.counters.server_errors_total;
  send(serialize_reply(r, keep_alive, request_id_), keep_alive ? After::kFinish : After::kClose);
}

// ---- writing ----

void Connection::send(std::string bytes, After after) {
  writing_ = true;
  out_ = std::move(bytes);
  send_deadline_.expires_after(seconds(server_.options.send_timeout_s));
  send_deadline_.async_wait([self = shared_from_this(), epoch = ++send_epoch_](error_code ec) {
    if (ec || epoch != self->send_epoch_ || !self->writing_) return;
    ++self->server_.counters.timeouts_total;
    self->close();
  });
  asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this(), after](error_code ec, size_t) {
    self->on_sent(ec, after);
  });
}

void Connection::on_sent(error_code ec, After after) {
  writing_ = false;
  ++send_epoch_;
  send_deadline_.cancel();
  if (phase_.load() == Phase::kClosed) return;
  if (ec) return close();
  switch (after) {
    case After::kExchange:
      if (exchange_ && !exchange_->done()) return pump();
      return finish_response();
    case After::kFinish: return finish_response();
    case After::kReadBody: return read_body();
    case After::kClose: return linger_close();
  }
}

// ---- the peer while a generation runs ----

// Waits for the socket to become readable: end of stream means the client
// went away (its request is cancelled); data is a pipelined request, left
// for the next read.
void Connection::watch_peer() {
  watching_ = true;
  const unsigned epoch = ++watch_epoch_;
  socket_.async_wait(asio::ip::tcp::socket::wait_read,
                     [self = shared_from_this(), epoch](error_code ec) { self->on_peer_readable(ec, epoch); });
}

void Connection::on_peer_readable(error_code ec, unsigned epoch) {
  if (epoch != watch_epoch_ || phase_.load() == Phase::kClosed) return;
  watching_ = false;
  if (ec) return close();
  char byte;
  const ssize_t n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return watch_peer();
  close();
}

// ---- after a response ----

void Connection::finish_response() {
  exchange_.reset();
  tick_timer_.cancel();
  ++watch_epoch_;
  if (watching_) {
    watching_ = false;
    error_code ignored;
    socket_.cancel(ignored);  // only the watch is pending: the response is written
  }
  if (keep_alive_ && !stopping_) return read_header();
  // A client that sent nothing more has nothing to lose to a reset: on
  // shutdown its connection closes at once instead of lingering.
  error_code ec;
  if (stopping_ && socket_.available(ec) == 0 && !ec) return close();
  linger_close();
}

// Half-closes, then reads and drops what the client still sends until it
// closes too or the linger time ends.
void Connection::linger_close() {
  exchange_.reset();
  tick_timer_.cancel();
  ++watch_epoch_;  // a pending watch is moot: the drain below sees the end
  phase_ = Phase::kClosing;
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  if (!discard_) discard_ = std::make_unique<char[]>(kDiscardBytes);
  deadline_.expires_after(seconds(kLingerSeconds));
  deadline_.async_wait([self = shared_from_this(), epoch = ++deadline_epoch_](error_code ec) {
    if (!ec && epoch == self->deadline_epoch_) self->close();
  });
  struct Drain {
    std::shared_ptr<Connection> self;
    void operator()(error_code ec, size_t) {
      if (ec) return self->close();
      self->socket_.async_read_some(asio::buffer(self->discard_.get(), kDiscardBytes), Drain{self});
    }
  };
  Drain{shared_from_this()}(error_code{}, 0);
}

void Connection::close() {
  if (phase_.exchange(Phase::kClosed) == Phase::kClosed) return;
  exchange_.reset();
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  deadline_.cancel();
  send_deadline_.cancel();
  tick_timer_.cancel();
  server_.registry.remove(id_);
}

}  // namespace exactly::server
