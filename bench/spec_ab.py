#!/usr/bin/env python3
"""Speculation against none, taking turns: for each workload file of
bench/make_spec_workloads.py, runs `exactly batch` without speculation and
then with each --spec in turn, for --rounds rounds, and prints for each
proposer its median output tokens/s against none's, their ratio, the median
of the per-round ratios, the acceptance rate, mean accepted length, median
request latency and, at temperature 0, whether the outputs are identical.
Taking turns keeps slow phases of a shared machine out of the ratio; one
run without speculation per round serves every proposer of that round. Odd
rounds run the arms in reverse order (plain last), so that a machine
slowing down or speeding up within a round favours no arm.

    bench/spec_ab.py --workloads DIR --spec draft:D.gguf [--spec ngram@5 ...] [--cells chat_t0.0_n1,edit_t0.8_n4] [--rounds 5] [--rounds-large 3] [--cpus 0,1/2,3]

A proposer written METHOD@K drafts at most K tokens per step; without @K, at
most --k.

At temperature > 0 the two arms emit different texts of the same
distribution (drafting moves the draws), so one seed per request compares
texts of different lengths. --vary-seeds gives every request a new seed in
each round, the same for all arms of that round: over the rounds both arms
sample the same distribution of texts.

--cpus A/B/... measures several cells at once on a machine with cores to
spare: one worker per CPU set (A, B, ... each a comma-separated list of CPU
numbers), each taking the next cell, the largest first, and running its
processes pinned to its set. Both arms of a cell run in the same worker, so
they share whatever the neighbouring workers cost them.
"""
import argparse
import json
import statistics
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_spec_sweep import ROOT, run  # noqa: E402

CELLS = [f"{w}_t{t}_n{n}" for w in ("edit", "chat") for t in ("0.0", "0.8") for n in (1, 4, 16, 64)]


def split_k(spec, default_k):
    """'ngram@5' -> ('ngram', 5); 'ngram' -> ('ngram', default_k)."""
    method, sep, k = spec.rpartition("@")
    return (method, int(k)) if sep and k.isdigit() else (spec, default_k)


def reseeded(path, round_index, tmp_dir):
    """The workload with each request's seed moved on by 1000 per round."""
    out = Path(tmp_dir) / f"{path.stem}_r{round_index}.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        request = json.loads(line)
        request["seed"] = request.get("seed", 0) + 1000 * round_index
        lines.append(json.dumps(request))
    out.write_text("\n".join(lines) + "\n")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--spec", required=True, action="append", help="a proposer, METHOD or METHOD@K; repeat for several")
    ap.add_argument("--cells", default=",".join(CELLS))
    ap.add_argument("--rounds", type=int, default=5, help="rounds for 1 and 4 requests")
    ap.add_argument("--rounds-large", type=int, default=3, help="rounds for 16 and 64 requests")
    ap.add_argument("--exe", default=str(ROOT / "build" / "bin" / "exactly"))
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--vary-seeds", action="store_true", help="new seeds each round (see above)")
    ap.add_argument("--cpus", help="CPU sets for parallel workers, e.g. 0,1/2,3 (see above)")
    ap.add_argument("--json")
    args = ap.parse_args()
    cells = args.cells.split(",")
    with tempfile.TemporaryDirectory(prefix="spec_ab_") as tmp:
        if args.cpus:
            rows = measure_in_parallel(args, cells, tmp)
        else:
            rows = [row for cell in cells for row in measure_cell(args, cell, tmp)]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def measure_in_parallel(args, cells, tmp):
    """Rows of every cell, measured by one worker per CPU set, the cells with
    the most requests first; returned in the order the cells were given."""
    cpu_sets = [{int(c) for c in group.split(",")} for group in args.cpus.split("/")]
    queue = sorted(cells, key=lambda cell: -int(cell.rsplit("_n", 1)[1]))
    done, lock, errors = {}, threading.Lock(), []

    def worker(cpus):
        while True:
            with lock:
                if not queue or errors:
                    return
                cell = queue.pop(0)
            try:
                rows = measure_cell(args, cell, tmp, cpus)
            except Exception as e:  # noqa: BLE001 - reported after the join
                with lock:
                    errors.append(f"{cell}: {e}")
                return
            with lock:
                done[cell] = rows

    threads = [threading.Thread(target=worker, args=(cpus,)) for cpus in cpu_sets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit("spec_ab: " + "; ".join(errors))
    return [row for cell in cells for row in done[cell]]


def measure_cell(args, cell, tmp, cpus=None):
    """The cell's rows, one per proposer, each printed as it is done."""
    rows = []
    path = Path(args.workloads) / f"{cell}.jsonl"
    n = int(cell.rsplit("_n", 1)[1])
    rounds = args.rounds if n <= 4 else args.rounds_large
    base, spec = [], {p: [] for p in args.spec}
    for round_index in range(rounds):
        if args.vary_seeds:
            path = reseeded(Path(args.workloads) / f"{cell}.jsonl", round_index, tmp)
        arms = [None] + args.spec
        for p in arms if round_index % 2 == 0 else arms[::-1]:
            if p is None:
                base.append(run(args.exe, args.model, path, None, args.threads, args.k, cpus))
            else:
                method, k = split_k(p, args.k)
                spec[p].append(run(args.exe, args.model, path, method, args.threads, k, cpus))
    tb = [r[0]["output_tokens_per_second"] for r in base]
    for p, runs in spec.items():
        ts = [r[0]["output_tokens_per_second"] for r in runs]
        same = all(b[1] == s[1] for b, s in zip(base, runs))
        row = {"cell": cell, "spec": p, "none_tok_s": tb, "spec_tok_s": ts,
               "ratio": statistics.median(ts) / statistics.median(tb),
               "per_round_ratio": statistics.median(s / b for s, b in zip(ts, tb)),
               "acceptance": [r[0].get("spec_acceptance_rate") for r in runs],
               "mean_accepted": [r[0].get("spec_mean_accepted_length") for r in runs],
               "drafted": [r[0].get("spec_drafted_tokens") for r in runs],
               "draft_seconds": [r[0].get("spec_draft_seconds") for r in runs],
               "draft_pass_tokens": [r[0].get("spec_draft_pass_tokens") for r in runs],
               "elapsed_none_s": [r[0].get("elapsed_seconds") for r in base],
               "elapsed_spec_s": [r[0].get("elapsed_seconds") for r in runs],
               "latency_none_s": statistics.median(r[0]["end_to_end_latency_seconds"]["median"] for r in base),
               "latency_spec_s": statistics.median(r[0]["end_to_end_latency_seconds"]["median"] for r in runs),
               "identical": same if "_t0.0_" in cell else None}
        rows.append(row)
        acc = statistics.median(a or 0 for a in row["acceptance"])
        mal = statistics.median(m or 0 for m in row["mean_accepted"])
        name = "draft:" + Path(p[len("draft:"):]).name if p.startswith("draft:") else p
        print(f"{cell:<14} {name:<16} none {statistics.median(tb):6.1f} spec {statistics.median(ts):6.1f}"
              f" x{row['ratio']:.2f} (per round x{row['per_round_ratio']:.2f})"
              f"  acc {acc:.2f} len {mal:.2f} drafted {statistics.median(d or 0 for d in row['drafted']):.0f}"
              f"  latency {row['latency_none_s']:.2f} -> {row['latency_spec_s']:.2f} s"
              f"  runs none {[round(x) for x in tb]} spec {[round(x) for x in ts]}"
              + ("" if row["identical"] is None else f"  identical={row['identical']}"), flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
