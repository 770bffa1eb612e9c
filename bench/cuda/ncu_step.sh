#!/usr/bin/env bash
# Where an engine step's GPU time goes, kernel by kernel: Nsight Compute
# times every kernel of a short run (Llama-3-8B's shape with random weights,
# BATCH prompts of LEN tokens, two generated tokens each: one step with all
# the prompts, one decode step), each kernel alone (ncu serialises them),
# clocks left alone; bench/cuda/ncu_step_summary.py then sums each step's
# kernels by kind. The same run without ncu gives the step's wall
# time (step-trace.csv) to set them against.
#   bench/cuda/ncu_step.sh OUT EXACTLY_RUNNER [BATCH=16] [LEN=512]
# EXACTLY_RUNNER: `exactly` or scripts/pack-gpu-binary's run-exactly.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:?usage: bench/cuda/ncu_step.sh OUT EXACTLY_RUNNER [BATCH] [LEN]}"
BIN="${2:?usage: bench/cuda/ncu_step.sh OUT EXACTLY_RUNNER [BATCH] [LEN]}"
BATCH="${3:-16}"; LEN="${4:-512}"
mkdir -p "$OUT"
ARGS=(bench throughput -m "$ROOT/bench/configs/llama-3-8b.json" --load-format dummy --device cuda
      --batch-sizes "$BATCH" --input-len "$LEN" --output-len 2 -r 1 --max-num-batched-tokens $((BATCH * LEN))
      --max-num-seqs "$BATCH")
"$BIN" "${ARGS[@]}" --step-trace "$OUT/step-trace.csv" >"$OUT/run.log" 2>&1
ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  "$BIN" "${ARGS[@]}" >"$OUT/kernels.csv" 2>"$OUT/ncu.log" || true
{ python3 "$ROOT/bench/cuda/ncu_step_summary.py" "$OUT/kernels.csv" --tokens $((BATCH * LEN))
  python3 "$ROOT/bench/cuda/ncu_step_summary.py" "$OUT/kernels.csv" --tokens "$BATCH" --step 1; } | tee "$OUT/summary.txt"
