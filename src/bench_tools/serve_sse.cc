#include "bench_tools/serve_sse.h"

namespace exactly::bench_tools {

namespace {

// Position and length of the first event terminator in `s` (a blank line,
// with either "\n" or "\r\n" line ends), or npos.
std::pair<size_t, size_t> find_terminator(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n') continue;
    if (i + 1 < s.size() && s[i + 1] == '\n') return {i, 2};
    if (i + 2 < s.size() && s[i + 1] == '\r' && s[i + 2] == '\n') return {i, 3};
  }
  return {std::string_view::npos, 0};
}

}  // namespace

void SseDecoder::feed(std::string_view bytes, std::vector<std::string>& payloads) {
  pending_.append(bytes);
  size_t consumed = 0;
  for (;;) {
    std::string_view rest(pending_.data() + consumed, pending_.size() - consumed);
    auto [at, len] = find_terminator(rest);
    if (at == std::string_view::npos) break;
    take_event(rest.substr(0, at), payloads);
    consumed += at + len;
  }
  pending_.erase(0, consumed);
}

void SseDecoder::take_event(std::string_view event, std::vector<std::string>& payloads) {
  std::string data;
  bool has_data = false;
  while (!event.empty()) {
    size_t nl = event.find('\n');
    std::string_view line = event.substr(0, nl);
    event = nl == std::string_view::npos ? std::string_view() : event.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, 5) != "data:") continue;
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (has_data) data += '\n';
    data.append(line);
    has_data = true;
  }
  if (has_data) payloads.push_back(std::move(data));
}

}  // namespace exactly::bench_tools
