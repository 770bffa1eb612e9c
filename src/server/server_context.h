// What every connection of the server reads or updates, owned by serve().
#pragma once

#include <cstdint>

#include <boost/asio/thread_pool.hpp>

#include "server/connection_registry.h"
#include "server/generation_exchange.h"
#include "server/generation_request.h"
#include "server/http_counters.h"
#include "server/http_server.h"
#include "server/metrics.h"

namespace exactly::server {

struct ServerContext {
  const ServerOptions& options;
  const ServedModel& model;
  const GenerationExchange::Context& exchange;
  const MetricsBoard& metrics;
  HttpCounters& counters;
  boost::asio::thread_pool& parse_pool;
  ConnectionRegistry& registry;
};

}  // namespace exactly::server
