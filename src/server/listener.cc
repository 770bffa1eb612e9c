#include "server/listener.h"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "core/error.h"
#include "core/format.h"
#include "server/connection.h"

namespace exactly::server {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

Listener::Listener(asio::io_context& io, ServerContext& server)
    : io_(io), server_(server), acceptor_(asio::make_strand(io)), retry_(acceptor_.get_executor()) {
  const ServerOptions& o = server.options;
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(o.host, ec);
  const auto fail = [&](const std::string& why) {
    throw Error(strformat("cannot listen on %s:%d: %s", o.host.c_str(), o.port, why.c_str()), ExitCode::kUsage);
  };
  if (ec) fail("not an IP address");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(o.port));
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  // A burst of clients connecting at once must not overflow the backlog.
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail(ec.message());
}

void Listener::start() {
  asio::post(acceptor_.get_executor(), [this] { accept(); });
}

void Listener::stop() {
  asio::post(acceptor_.get_executor(), [this] {
    error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
  });
}

void Listener::accept() {
  if (!acceptor_.is_open()) return;
  // Each connection gets a strand of its own: its handlers never run at once.
  acceptor_.async_accept(asio::make_strand(io_),
                         [this](error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
}

void Listener::on_accept(error_code ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // Out of descriptors (or a transient failure): wait rather than spin.
    retry_.expires_after(std::chrono::milliseconds(100));
    retry_.async_wait([this](error_code e) {
      if (!e) accept();
    });
    return;
  }
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // event-stream chunks are small and must not wait
  if (server_.registry.size() >= server_.options.max_connections && !make_room()) {
    socket.close(ignored);
    return accept();
  }
  auto c = std::make_shared<Connection>(std::move(socket), server_, next_id_++);
  server_.registry.add(c);
  c->start();
  accept();
}

// Closes the longest-waiting idle connection. False when every connection is
// answering a request: the new one is then refused. (The count may exceed the
// bound by the evicted connections whose close is still queued.)
bool Listener::make_room() {
  auto oldest = server_.registry.oldest_awaiting_request();
  if (!oldest) return false;
  ++server_.counters.connections_evicted;
  oldest->force_close();
  return true;
}

}  // namespace exactly::server
