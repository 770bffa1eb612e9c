// Programmer-error checks that stay on in release builds.
//
// EXACTLY_CHECK is for invariants the code itself must keep (a kernel called
// with mismatched shapes, an index the caller computed wrongly). A failed
// check prints file, line and message and aborts. User-facing failures (a bad
// model file, a malformed request) are exactly::Error exceptions instead.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/format.h"

namespace exactly::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);
inline std::string check_message() { return {}; }
template <class... Args>
std::string check_message(const char* fmt, Args... args) {
  if constexpr (sizeof...(Args) == 0) {
    return fmt;
  } else {
    return strformat(fmt, args...);
  }
}
}  // namespace exactly::detail

#define EXACTLY_CHECK(cond, ...)                                                             \
  do {                                                                                      \
    if (!(cond)) [[unlikely]]                                                               \
      ::exactly::detail::check_failed(__FILE__, __LINE__, #cond, ::exactly::detail::check_message(__VA_ARGS__)); \
  } while (0)
