// The whole command line as one function: the `exactly` executable's main
// calls it, and so does the Python package's `python -m exactly`, so both
// accept the same arguments and exit with the same codes.
#pragma once

namespace exactly::cli {

// Parses argv (argv[0] is the program's name) and runs the subcommand;
// returns the exit code (0, or an ExitCode). Never throws.
int run_cli(int argc, const char* const* argv);

}  // namespace exactly::cli
