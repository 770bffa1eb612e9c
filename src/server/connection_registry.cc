#include "server/connection_registry.h"

#include <vector>

#include "server/connection.h"

namespace exactly::server {

void ConnectionRegistry::add(const std::shared_ptr<Connection>& c) {
  std::lock_guard lock(mutex_);
  open_[c->id()] = c;
}

void ConnectionRegistry::remove(uint64_t id) {
  std::lock_guard lock(mutex_);
  open_.erase(id);
}

size_t ConnectionRegistry::size() const {
  std::lock_guard lock(mutex_);
  return open_.size();
}

std::shared_ptr<Connection> ConnectionRegistry::oldest_awaiting_request() const {
  std::lock_guard lock(mutex_);
  for (const auto& [id, weak] : open_)
    if (auto c = weak.lock(); c && c->awaiting_request()) return c;
  return nullptr;
}

void ConnectionRegistry::for_each(const std::function<void(Connection&)>& f) const {
  std::vector<std::shared_ptr<Connection>> all;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, weak] : open_)
      if (auto c = weak.lock()) all.push_back(std::move(c));
  }
  for (const auto& c : all) f(*c);
}

}  // namespace exactly::server
