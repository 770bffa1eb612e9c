#include "kvcache/capacity.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "core/check.h"

namespace exactly {

int32_t num_blocks_for_memory(int64_t bytes_budget, int64_t bytes_per_token_slot, int32_t block_size) {
  EXACTLY_CHECK(bytes_per_token_slot > 0 && block_size > 0, "%lld bytes per slot, %d slots per block",
                static_cast<long long>(bytes_per_token_slot), block_size);
  if (bytes_budget <= 0) return 0;
  const int64_t blocks = bytes_budget / (bytes_per_token_slot * block_size);
  // Block ids are int32; a budget beyond that is capped, not wrapped.
  return blocks > INT32_MAX ? INT32_MAX : static_cast<int32_t>(blocks);
}

std::optional<int64_t> parse_byte_size(std::string_view text) {
  size_t number_end = 0;
  auto is_number_char = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '.'; };
  while (number_end < text.size() && is_number_char(text[number_end])) ++number_end;
  if (number_end == 0) return std::nullopt;
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + number_end, value);
  if (ec != std::errc() || ptr != text.data() + number_end) return std::nullopt;

  std::string unit;
  for (size_t i = number_end; i < text.size(); ++i) {
    if (text[i] == ' ' && unit.empty()) continue;
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  }
  struct Unit {
    const char* name;
    double scale;
  };
  static const Unit units[] = {
      {"", 1},       {"b", 1},           {"kb", 1e3},         {"mb", 1e6},
      {"gb", 1e9},   {"tb", 1e12},       {"kib", 1024.0},     {"mib", 1048576.0},
      {"gib", 1073741824.0}, {"tib", 1099511627776.0},
  };
  for (const Unit& u : units) {
    if (unit != u.name) continue;
    const double bytes = std::floor(value * u.scale);
    if (!(bytes < 9.2e18)) return std::nullopt;
    return static_cast<int64_t>(bytes);
  }
  return std::nullopt;
}

}  // namespace exactly
