// The `exactly` command line: one executable, one subcommand per file.
#include "cli/cli_main.h"

int main(int argc, char** argv) { return exactly::cli::run_cli(argc, argv); }
