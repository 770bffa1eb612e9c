#!/usr/bin/env bash
# Builds the extension of this pack (scripts/pack-python-extension) with this
# machine's python3 and lays the package out as a build tree:
#   build.sh GPU_DIR OUT   ->  OUT/python/exactly (modules and _exactly), OUT/bin/exactly (GPU_DIR/run-exactly)
# Run the package with GPU_DIR/lib and the CUDA libraries on LD_LIBRARY_PATH.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GPU_DIR="$(cd "${1:?usage: build.sh GPU_DIR OUT}" && pwd)"
OUT="${2:?usage: build.sh GPU_DIR OUT}"
PY="${PYTHON:-python3}"
cmake -S "$HERE" -B "$HERE/build" -DCMAKE_BUILD_TYPE=Release -DGPU_DIR="$GPU_DIR" \
      -DPython_EXECUTABLE="$(command -v "$PY")" >"$HERE/configure.log" 2>&1 || { tail -n 30 "$HERE/configure.log"; exit 1; }
cmake --build "$HERE/build" -j "$(nproc)" >"$HERE/build.log" 2>&1 || { grep -m 5 -A 8 error "$HERE/build.log"; exit 1; }
mkdir -p "$OUT/python/exactly" "$OUT/bin"
cp "$HERE"/python/exactly/*.py "$HERE"/build/_exactly*.so "$OUT/python/exactly/"
ln -sf "$GPU_DIR/run-exactly" "$OUT/bin/exactly"
echo "$OUT/python/exactly"
