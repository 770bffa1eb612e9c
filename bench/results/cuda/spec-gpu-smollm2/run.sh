#!/usr/bin/env bash
# speculation on the GPU with the real default model: plain vs ngram (adaptive and fixed k)
set -u
cat /tmp/m/model.part.aa .xfer/b/model.part.ab > /tmp/m/model.gguf
echo "$(cat .xfer/c/model.sha)  /tmp/m/model.gguf" | sha256sum -c - >/dev/null || exit 1
mkdir -p /tmp/x && tar -xJf .xfer/c/bin.tar.xz -C /tmp/x
BIN=/tmp/x/gpu/run-exactly M=/tmp/m/model.gguf
cell() { # name workload flags...
  local name=$1 wl=$2; shift 2
  for r in 1 2 3; do
    $BIN batch -m $M --device cuda -i .xfer/c/wl/$wl.jsonl -o /tmp/out.jsonl --stats $OUT/$name-$wl-$r.json "$@" >/dev/null 2>$OUT/err.log || { echo "FAIL $name $wl"; tail -3 $OUT/err.log; }
  done
  python3 - "$OUT" "$name" "$wl" <<'PY'
import json,sys,statistics
out,name,wl=sys.argv[1:]
rs=[json.load(open(f"{out}/{name}-{wl}-{r}.json")) for r in (1,2,3)]
tps=[r["output_tokens_per_second"] for r in rs]
dec=[r["decode_only_tokens_per_second"] for r in rs]
print(f"{wl:18s} {name:12s} tok/s {statistics.median(tps):8.1f} decode-only {statistics.median(dec):8.1f} acc {rs[-1]['spec_acceptance_rate']:.2f} drafted {rs[-1]['spec_drafted_tokens']} steps {rs[-1]['steps']}")
PY
}
for wl in edit_t0.0_n1 edit_t0.0_n16 chat_t0.0_n64; do
  cell plain $wl
  cell plain-fast $wl --no-deterministic
done
for wl in edit_t0.0_n1 edit_t0.0_n16; do
  cell ngram $wl --spec ngram
  cell ngram-fast $wl --spec ngram --no-deterministic
done
