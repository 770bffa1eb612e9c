// User-facing errors: bad files, bad arguments, bad requests.
//
// They carry the process exit code the CLI should use, so a corrupt model file
// exits 2 from every subcommand without each one deciding for itself.
#pragma once

#include <stdexcept>
#include <string>

namespace exactly {

enum class ExitCode : int {
  kOk = 0,
  kRuntime = 1,    // anything else that went wrong at run time
  kBadInput = 2,   // unreadable or malformed input file (model, prompt file)
  kUsage = 64,     // bad command-line arguments
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ExitCode code = ExitCode::kRuntime)
      : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// A model or data file that cannot be read as what it claims to be.
class FileFormatError : public Error {
 public:
  explicit FileFormatError(const std::string& message) : Error(message, ExitCode::kBadInput) {}
};

}  // namespace exactly
