# Shared by the scripts: paths and small helpers. Sourced, not run.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${EXACTLY_BUILD_DIR:-$ROOT/build}"
VENV="$ROOT/.venv"
MODEL_DIR="$ROOT/models"
DEFAULT_MODEL="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
log() { printf '\033[1m[exactly]\033[0m %s\n' "$*" >&2; }
