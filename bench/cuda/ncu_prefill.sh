#!/usr/bin/env bash
# Nsight Compute's view of the Hopper prefill kernel beside cuDNN's, at the
# issue's shape (4 x 32 heads x 4096, d 128, bf16, no mask): the lab's
# version INDEX (default 35: v54, one CTA per item as production runs 4k
# contexts) and PyTorch's cuDNN backend, one launch each after warm-up, the
# same sections for both. Needs ncu with access to the counters.
#   bench/cuda/ncu_prefill.sh OUT [INDEX]
# With NCU_SOURCE=1, also the warp-stall samples per SASS instruction of both
# kernels (OUT/*-source.csv) and every metric of the warp-state section.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:?usage: bench/cuda/ncu_prefill.sh OUT [INDEX]}"; INDEX="${2:-35}"
mkdir -p "$OUT"
SECTIONS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section SchedulerStats --section WarpStateStats --section InstructionStats --section LaunchStats)
nvcc -std=c++20 -O3 -I"$ROOT/src" -I"$ROOT/dev/cuda" -gencode arch=compute_90a,code=sm_90a -lineinfo \
  -o "$OUT/attention_lab" "$ROOT/dev/cuda/attention_lab.cu"
# The lab runs four small problems, then the non-causal 4 x 4096 (3 warm-up
# launches, then timed ones): the 11th launch of the kernel is a timed one.
ncu --clock-control none "${SECTIONS[@]}" -k regex:flash_prefill_sm90_ws --launch-skip 10 --launch-count 1 \
  "$OUT/attention_lab" prefill "$INDEX" >"$OUT/ours.txt" 2>&1 || true
cat >"$OUT/cudnn.py" <<'PY'
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
q, k, v = (torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(6):
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=False)
torch.cuda.synchronize()
PY
ncu --clock-control none "${SECTIONS[@]}" -k regex:cudnn --launch-skip 4 --launch-count 1 \
  python3 "$OUT/cudnn.py" >"$OUT/cudnn.txt" 2>&1 || true
if [[ "${NCU_SOURCE:-0}" == 1 ]]; then
  ncu --clock-control none --section SourceCounters --section WarpStateStats -k regex:flash_prefill_sm90_ws \
    --launch-skip 10 --launch-count 1 -f -o "$OUT/ours" "$OUT/attention_lab" prefill "$INDEX" >/dev/null 2>&1 || true
  ncu --clock-control none --section SourceCounters --section WarpStateStats -k regex:cudnn --launch-skip 4 \
    --launch-count 1 -f -o "$OUT/cudnn" python3 "$OUT/cudnn.py" >/dev/null 2>&1 || true
  for who in ours cudnn; do
    ncu -i "$OUT/$who.ncu-rep" --page details --print-details all >"$OUT/$who-stalls.txt" 2>&1 || true
    ncu -i "$OUT/$who.ncu-rep" --page source --csv --print-source sass >"$OUT/$who-source.csv" 2>&1 || true
    rm -f "$OUT/$who.ncu-rep"
  done
fi
rm -f "$OUT/attention_lab"
