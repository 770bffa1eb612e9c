#!/usr/bin/env python3
"""Runs the speculation benchmark (docs/journal/benchmarks-record.md §4):
every workload file of bench/make_spec_workloads.py through `exactly batch
--stats`, without
speculation and with each proposer, and prints output tokens/s, the ratio to
no speculation measured in the same sweep, acceptance rate and mean accepted
length. Each cell is the median of --repeats runs (greedy outputs are also
checked to be identical with and without speculation at temperature 0).

    bench/run_spec_sweep.py --workloads DIR --draft DRAFT.gguf --json OUT.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(exe, model, path, spec, threads, k, cpus=None):
    """One `exactly batch` run: its --stats and its sorted output texts. With
    cpus (a set of CPU numbers) the process runs pinned to them."""
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    with tempfile.TemporaryDirectory() as tmp:
        out, stats = Path(tmp) / "out.jsonl", Path(tmp) / "stats.json"
        cmd = [exe, "batch", "-m", model, "-i", str(path), "-o", str(out), "--stats", str(stats), "-t", str(threads)]
        if spec:
            cmd += ["--spec", spec, "--num-speculative-tokens", str(k)]
        subprocess.run(cmd, check=True, capture_output=True, preexec_fn=pin)
        texts = [json.loads(line).get("text", json.loads(line).get("choices", [{}])[0].get("text"))
                 for line in out.read_text().splitlines()]
        return json.loads(stats.read_text()), sorted(t or "" for t in texts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--draft", help="draft model for draft:PATH (e.g. from exactly export --layers 8)")
    ap.add_argument("--exe", default=str(ROOT / "build" / "bin" / "exactly"))
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3, help="runs per cell for 1 and 4 requests (1 above)")
    ap.add_argument("--json")
    args = ap.parse_args()
    proposers = {"edit": ["ngram"], "chat": ["ngram", "layerskip:8"] + ([f"draft:{args.draft}"] if args.draft else [])}
    rows = []
    for workload in ("edit", "chat"):
        for temp in ("0.0", "0.8"):
            for n in (1, 4, 16, 64):
                path = Path(args.workloads) / f"{workload}_t{temp}_n{n}.jsonl"
                reps = args.repeats if n <= 4 else 1
                cells = {}
                for spec in [None] + proposers[workload]:
                    runs = [run(args.exe, args.model, path, spec, args.threads, args.k) for _ in range(reps)]
                    tps = statistics.median(r[0]["output_tokens_per_second"] for r in runs)
                    s = runs[0][0]
                    cells[spec] = (tps, s, runs[0][1])
                base = cells[None][0]
                for spec, (tps, s, texts) in cells.items():
                    same = None if temp != "0.0" or spec is None else texts == cells[None][2]
                    row = {"workload": workload, "temperature": float(temp), "requests": n,
                           "proposer": spec or "none", "output_tok_s": tps, "ratio": tps / base,
                           "acceptance": s.get("spec_acceptance_rate"),
                           "mean_accepted": s.get("spec_mean_accepted_length"),
                           "latency_median_s": s["end_to_end_latency_seconds"]["median"],
                           "greedy_identical": same, "repeats": reps}
                    rows.append(row)
                    name = (spec or "none").replace(args.draft or "@@", "8-layer export")
                    acc = "" if spec is None else f"  acc {row['acceptance'] or 0:.2f}, len {row['mean_accepted'] or 0:.2f}"
                    print(f"{workload} t={temp} n={n:<3} {name:<22} {tps:7.1f} tok/s  x{tps / base:.2f}"
                          f"  latency {row['latency_median_s']:.2f} s{acc}"
                          + ("" if same is None else f"  identical={same}"), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    sys.exit(main())
