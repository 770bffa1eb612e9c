// Server-sent events arrive in arbitrary byte pieces: an event may be split
// across reads, and one read may hold several events. The decoder buffers the
// bytes and hands back the `data:` payload of each event once its blank-line
// terminator has arrived, so the caller can timestamp complete events only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace exactly::bench_tools {

class SseDecoder {
 public:
  // Appends `bytes` and moves the payloads of the events they complete to
  // `payloads` (multi-line data fields are joined with '\n', as the SSE
  // specification says). Comment lines and other fields are skipped.
  void feed(std::string_view bytes, std::vector<std::string>& payloads);

  // Bytes of an event still waiting for its terminator.
  bool has_partial_event() const { return !pending_.empty(); }

 private:
  void take_event(std::string_view event, std::vector<std::string>& payloads);

  std::string pending_;
};

}  // namespace exactly::bench_tools
