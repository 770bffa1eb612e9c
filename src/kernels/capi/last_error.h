// The message behind the C interface's -1: one per thread, so concurrent
// callers never read each other's errors.
#pragma once

#include <exception>
#include <string>

namespace exactly::capi {

std::string& last_error();

// Runs fn, turning any exception into -1 and a stored message.
template <typename Fn>
int guarded(Fn&& fn) {
  try {
    fn();
    return 0;
  } catch (const std::exception& e) {
    last_error() = e.what();
  } catch (...) {
    last_error() = "unknown error";
  }
  return -1;
}

}  // namespace exactly::capi
