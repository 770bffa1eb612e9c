#!/usr/bin/env bash
# The README's first command as a new user meets it: a fresh clone (no
# virtualenv, no model, no build, no compiler cache), then
#   scripts/run "Write a haiku about the sea"
# timed from the moment it is typed to the first byte of the answer on
# stdout, and to its end. The Debian packages are assumed present.
#
#   bench/first_run.sh [REPO] [WORKDIR]     (default: this repository, a new temporary folder)
set -euo pipefail
REPO="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
WORK="${2:-$(mktemp -d)}"
git clone -q "$REPO" "$WORK/exactly"
cd "$WORK/exactly"
start=$(date +%s.%N)
scripts/run "Write a haiku about the sea" 2>"$WORK/stderr.log" | python3 -c '
import sys, time
start = float(sys.argv[1])
first = sys.stdin.buffer.read(1)
ttft = time.time() - start
rest = sys.stdin.buffer.read()
total = time.time() - start
sys.stderr.write((first + rest).decode("utf-8", "replace") + "\n")
print(f"first byte of the answer after {ttft:.1f} s; done after {total:.1f} s")
' "$start"
grep -E '^\[exactly\]|tokens/s|ms' "$WORK/stderr.log" || true
echo "clone and logs in $WORK"
