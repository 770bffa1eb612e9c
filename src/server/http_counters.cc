#include "server/http_counters.h"

#include "core/format.h"

namespace exactly::server {

namespace {

void line(std::string& out, const char* type, const char* name, const char* help, int64_t value) {
  out += strformat("# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name,
                   static_cast<long long>(value));
}

}  // namespace

void HttpCounters::render(std::string& out) const {
  line(out, "gauge", "exactly_http_connections_open", "HTTP connections open.", connections_open.load());
  line(out, "counter", "exactly_http_connections_total", "HTTP connections accepted.", connections_total.load());
  line(out, "counter", "exactly_http_connections_evicted_total",
       "Idle connections closed to make room under --max-connections.", connections_evicted.load());
  line(out, "counter", "exactly_http_requests_total", "HTTP requests whose headers were read.",
       requests_total.load());
  line(out, "counter", "exactly_http_timeouts_total",
       "Connections closed because headers, a body or a write did not complete in time.", timeouts_total.load());
  line(out, "counter", "exactly_http_refused_total",
       "Requests refused for their framing: size, header count, syntax.", refused_total.load());
  line(out, "counter", "exactly_http_server_errors_total", "Responses with a 5xx status of the server's making.",
       server_errors_total.load());
}

}  // namespace exactly::server
