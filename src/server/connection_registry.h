// The open connections, so that the server can bound their number (the
// longest-waiting idle one makes room for a new one) and close them all on
// shutdown. Any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace exactly::server {

class Connection;

class ConnectionRegistry {
 public:
  void add(const std::shared_ptr<Connection>& c);
  void remove(uint64_t id);
  size_t size() const;
  // The oldest connection that waits for a request's headers, or null.
  std::shared_ptr<Connection> oldest_awaiting_request() const;
  // Calls `f` on every open connection (outside the lock).
  void for_each(const std::function<void(Connection&)>& f) const;

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, std::weak_ptr<Connection>> open_;  // by id: oldest first
};

}  // namespace exactly::server
