// A one-line progress bar on stderr, drawn only when stderr is a terminal.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace exactly::cli {

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total)
      : label_(std::move(label)), total_(total), enabled_(isatty(STDERR_FILENO) != 0),
        start_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() { finish(); }

  void update(int64_t done, const std::string& note = "") {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    const int width = 30;
    const int filled = total_ > 0 ? static_cast<int>(width * done / total_) : width;
    std::fprintf(stderr, "\r%s [%.*s%*s] %lld/%lld %s\033[K", label_.c_str(), filled,
                 "##############################", width - filled, "", static_cast<long long>(done),
                 static_cast<long long>(total_), note.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
  void finish() {
    if (enabled_ && drawn_) std::fprintf(stderr, "\n");
    drawn_ = false;
  }

 private:
  std::string label_;
  int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_{};
};

}  // namespace exactly::cli
