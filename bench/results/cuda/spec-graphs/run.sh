#!/usr/bin/env bash
# Speculation on the GPU with the real default model: plain against ngram
# with verifies replayed from graphs (the default) and launched from the host
# (EXACTLY_GRAPH_MAX_QUERY=1), REPS rounds interleaved, medians.
#   run.sh "WORKLOADS" "CONFIGS" REPS     (model and binary unpacked as in ../spec-gpu-smollm2)
set -u
WLS=$1 CONFIGS=$2 REPS=$3
BIN=/tmp/x/gpu/run-exactly M=/tmp/m/model.gguf
one() { # config workload round
  local cfg=$1 wl=$2 r=$3 env=() flags=()
  case $cfg in
    plain) ;;
    ngram) flags=(--spec ngram) ;;
    ngram-hostverify) flags=(--spec ngram); env=(EXACTLY_GRAPH_MAX_QUERY=1) ;;
    plain-hostverify) env=(EXACTLY_GRAPH_MAX_QUERY=1) ;;
    ngram-k5) flags=(--spec ngram --num-speculative-tokens 5) ;;
    ngram-k8) flags=(--spec ngram --num-speculative-tokens 8) ;;
  esac
  env "${env[@]}" $BIN batch -m $M --device cuda -i .xfer/c/wl/$wl.jsonl -o /tmp/out-$cfg-$wl-$r.jsonl \
    --stats $S/$cfg-$wl-$r.json "${flags[@]}" >/dev/null 2>/tmp/err-$cfg-$wl-$r.log || echo "FAIL $cfg $wl $r"
}
S=/tmp/stats; mkdir -p $S
for wl in $WLS; do
  for r in $(seq 1 $REPS); do
    for cfg in $CONFIGS; do one $cfg $wl $r; done
  done
  python3 - "$S" "$wl" "$REPS" $CONFIGS <<'PY'
import json, sys, statistics, os
d, wl, reps, *cfgs = sys.argv[1:]
base = None
for c in cfgs:
    rs = [json.load(open(f"{d}/{c}-{wl}-{r}.json")) for r in range(1, int(reps) + 1) if os.path.exists(f"{d}/{c}-{wl}-{r}.json")]
    if not rs: continue
    tps = statistics.median(r["output_tokens_per_second"] for r in rs)
    ttft = statistics.median(r["time_to_first_token_seconds"]["median"] for r in rs)
    base = base or tps
    print(f"{wl:16s} {c:17s} tok/s {tps:8.1f} x{tps/base:5.2f} ttft {ttft*1000:6.1f} ms acc {rs[-1]['spec_acceptance_rate']:.2f} "
          f"len {rs[-1]['spec_mean_accepted_length']:.2f} drafted {rs[-1]['spec_drafted_tokens']} steps {rs[-1]['steps']} gen {rs[-1]['generated_tokens']}")
PY
done
tar -czf $OUT/stats.tar.gz -C /tmp stats
