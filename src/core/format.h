// printf-style formatting into std::string (GCC 12 has no std::format).
#pragma once

#include <cstdarg>
#include <string>

namespace exactly {

[[gnu::format(printf, 1, 2)]] std::string strformat(const char* fmt, ...);
std::string vstrformat(const char* fmt, va_list args);

// "1.50 MiB", "98.36 MB" style sizes for people.
std::string human_bytes(double bytes);

}  // namespace exactly
