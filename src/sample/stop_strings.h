// Finds stop strings in streamed text, across token boundaries. Text that
// could still turn out to be the start of a stop string is held back, so a
// stop string never reaches the client even in part, and the text before it
// is emitted exactly once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace exactly {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Adds decoded text; returns what can be emitted now. Once a stop string is
  // found, returns the text before it and stopped() becomes true; later calls
  // return nothing.
  std::string push(std::string_view text);
  // The held-back tail, at the end of generation when no stop string matched.
  std::string flush();

  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  size_t longest_ = 0;
  std::string pending_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace exactly
