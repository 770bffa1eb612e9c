#!/usr/bin/env bash
# Batch-1 decode of small and large shapes on the GPU: the canonical order
# before and after narrow tilings of gemm_rows, against --no-deterministic;
# throughput, then each kernel's time under Nsight Compute (kernels
# serialized: no overlap between them).
#   run.sh OUT        (packed binaries unpacked at /tmp/new/gpu and /tmp/old/gpu)
set -u
OUT=$1
mkdir -p "$OUT"
tp() { # binary config batches label flags...
  local bin=/tmp/$1/gpu/run-exactly cfg=$2 b=$3 label=$4; shift 4
  $bin bench throughput -m bench/configs/$cfg.json --load-format dummy --device cuda --batch-sizes $b \
    --input-len 512 --output-len 128 -r 3 --max-num-batched-tokens 8192 --max-num-seqs 128 "$@" \
    >"$OUT/tp-$cfg-$label.log" 2>&1 || echo "FAIL tp $cfg $label"
  echo "== $cfg $label"; grep -iE "tokens/s|^ *[0-9]" "$OUT/tp-$cfg-$label.log" | tail -n 8
}
prof() { # binary config label output-len flags...
  local bin=/tmp/$1/gpu/run-exactly cfg=$2 label=$3 n=$4; shift 4
  timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-kernel-base function \
    $bin bench throughput -m bench/configs/$cfg.json --load-format dummy --device cuda --batch-sizes 1 \
    --input-len 512 --output-len $n -r 1 "$@" >"$OUT/ncu-$cfg-$label.csv" 2>"$OUT/ncu-$cfg-$label.err" \
    || echo "FAIL ncu $cfg $label"
  python3 "$(dirname "$0")/kernels.py" "$OUT/ncu-$cfg-$label.csv" "$cfg $label"
}
${STEPS_TP:-true} && for cfg in smollm2-135m llama-3-8b; do
  tp new $cfg 1,8,64 canonical
  tp old $cfg 1,8,64 canonical-before
  tp new $cfg 1,8,64 fastest --no-deterministic
done
${STEPS_PROF:-true} && {
  prof new smollm2-135m canonical 33
  prof old smollm2-135m canonical-before 33
  prof new smollm2-135m fastest 33 --no-deterministic
}
