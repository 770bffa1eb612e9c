#!/usr/bin/env python3
"""Speculation against none, taking turns: for each workload file of
bench/make_spec_workloads.py, runs `exactly batch` without speculation and
with --spec SPEC alternately for --rounds rounds, and prints each side's
median output tokens/s, their ratio, the acceptance rate, mean accepted
length, median request latency and, at temperature 0, whether the outputs
are identical. Taking turns keeps slow phases of a shared machine out of
the ratio.

    bench/spec_ab.py --workloads DIR --spec draft:D.gguf [--cells chat_t0.0_n1,chat_t0.8_n1] [--rounds 5] [--rounds-large 3]
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_spec_sweep import ROOT, run  # noqa: E402

CELLS = [f"chat_t{t}_n{n}" for t in ("0.0", "0.8") for n in (1, 4, 16, 64)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--rounds", type=int, default=5, help="rounds for 1 and 4 requests")
    ap.add_argument("--rounds-large", type=int, default=3, help="rounds for 16 and 64 requests")
    ap.add_argument("--exe", default=str(ROOT / "build" / "bin" / "exactly"))
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    for cell in args.cells.split(","):
        path = Path(args.workloads) / f"{cell}.jsonl"
        n = int(cell.rsplit("_n", 1)[1])
        rounds = args.rounds if n <= 4 else args.rounds_large
        base, spec, same = [], [], True
        for _ in range(rounds):
            b = run(args.exe, args.model, path, None, args.threads, args.k)
            s = run(args.exe, args.model, path, args.spec, args.threads, args.k)
            base.append(b)
            spec.append(s)
            same = same and b[1] == s[1]
        tb = [r[0]["output_tokens_per_second"] for r in base]
        ts = [r[0]["output_tokens_per_second"] for r in spec]
        st = spec[0][0]
        row = {"cell": cell, "spec": args.spec, "none_tok_s": tb, "spec_tok_s": ts,
               "ratio": statistics.median(ts) / statistics.median(tb),
               "acceptance": [r[0].get("spec_acceptance_rate") for r in spec],
               "mean_accepted": [r[0].get("spec_mean_accepted_length") for r in spec],
               "latency_none_s": statistics.median(r[0]["end_to_end_latency_seconds"]["median"] for r in base),
               "latency_spec_s": statistics.median(r[0]["end_to_end_latency_seconds"]["median"] for r in spec),
               "identical": same if "_t0.0_" in cell else None}
        rows.append(row)
        acc = statistics.median(a or 0 for a in row["acceptance"])
        mal = statistics.median(m or 0 for m in row["mean_accepted"])
        print(f"{cell:<14} none {statistics.median(tb):6.1f} spec {statistics.median(ts):6.1f} x{row['ratio']:.2f}"
              f"  acc {acc:.2f} len {mal:.2f}  latency {row['latency_none_s']:.2f} -> {row['latency_spec_s']:.2f} s"
              f"  runs none {[round(x) for x in tb]} spec {[round(x) for x in ts]}"
              + ("" if row["identical"] is None else f"  identical={row['identical']}"), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    sys.exit(main())
