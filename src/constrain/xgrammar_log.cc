// xgrammar's logging hooks (built with XGRAMMAR_LOG_CUSTOMIZE=1): errors are
// thrown, as xgrammar's own logger does; warnings are kept per thread for
// take_xgrammar_warnings() instead of written to stderr.
#include "constrain/xgrammar_log.h"

#include <utility>

#include "support/logging.h"

namespace {

thread_local std::vector<std::string> g_warnings;

}  // namespace

namespace exactly {

std::vector<std::string> take_xgrammar_warnings() { return std::exchange(g_warnings, {}); }

}  // namespace exactly

namespace xgrammar {

[[noreturn]] void LogFatalImpl(const std::string& file, int lineno, const std::string& message) {
  throw LogFatalError(file, lineno, message);
}

void LogMessageImpl(const std::string&, int, int level, const std::string& message) {
  // Notes on how it compiles, not on what, and an escaped character that
  // stands for itself (as in Python's and JavaScript's regexes): nothing of
  // the grammar is left out.
  for (const char* benign : {"The body of the lazy rule", "The num_threads", "The character itself will be matched",
                             "matching the character literally"})
    if (message.find(benign) != std::string::npos) return;
  // The matcher's runtime warnings (a refused token) are answered by return values too.
  if (level == XGRAMMAR_LOG_LEVEL_WARNING && g_warnings.size() < 16) g_warnings.push_back(message);
}

}  // namespace xgrammar
