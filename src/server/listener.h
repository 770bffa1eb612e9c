// Accepts connections and keeps their number bounded: at --max-connections
// the connection that has waited longest for a request's headers is closed
// to make room, so idle and slow clients cannot lock out a new one.
#pragma once

#include <atomic>
#include <cstdint>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "server/server_context.h"

namespace exactly::server {

class Listener {
 public:
  // Throws Error when the address cannot be bound.
  Listener(boost::asio::io_context& io, ServerContext& server);
  void start();
  // Stops accepting (posted to the listener's strand).
  void stop();

 private:
  void accept();
  void on_accept(boost::system::error_code ec, boost::asio::ip::tcp::socket socket);
  bool make_room();

  boost::asio::io_context& io_;
  ServerContext& server_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;  // after running out of file descriptors
  uint64_t next_id_ = 1;
};

}  // namespace exactly::server
