#!/usr/bin/env bash
# Batch-1 decode of small and large shapes on the GPU, canonical order
# against --no-deterministic: throughput, then each kernel's time under
# Nsight Compute (kernels serialized: no overlap between them).
#   run.sh OUT        (the packed binary unpacked at /tmp/x/gpu)
set -u
OUT=$1 BIN=/tmp/x/gpu/run-exactly
mkdir -p "$OUT"
tp() { # config batches label flags...
  local cfg=$1 b=$2 label=$3; shift 3
  $BIN bench throughput -m bench/configs/$cfg.json --load-format dummy --device cuda --batch-sizes $b \
    --input-len 512 --output-len 128 -r 3 --max-num-batched-tokens 8192 --max-num-seqs 128 "$@" \
    >"$OUT/tp-$cfg-$label.log" 2>&1 || echo "FAIL tp $cfg $label"
  grep -E "tokens/s|batch" "$OUT/tp-$cfg-$label.log" | tail -n 6
}
prof() { # config label output-len flags...
  local cfg=$1 label=$2 n=$3; shift 3
  timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-kernel-base function \
    $BIN bench throughput -m bench/configs/$cfg.json --load-format dummy --device cuda --batch-sizes 1 \
    --input-len 512 --output-len $n -r 1 "$@" >"$OUT/ncu-$cfg-$label.csv" 2>"$OUT/ncu-$cfg-$label.err" \
    || echo "FAIL ncu $cfg $label"
  python3 "$(dirname "$0")/kernels.py" "$OUT/ncu-$cfg-$label.csv" "$cfg $label"
}
for cfg in smollm2-135m llama-3-8b; do
  tp $cfg 1,16,64 canonical
  tp $cfg 1,16,64 fastest --no-deterministic
done
prof smollm2-135m canonical 33
prof smollm2-135m fastest 33 --no-deterministic
prof llama-3-8b canonical 9
prof llama-3-8b fastest 9 --no-deterministic
