"""Summaries of Nsight Compute's per-instruction warp-stall samples (the
`--page source --csv --print-source sass` export of bench/cuda/ncu_prefill.sh):
the samples of the instructions executed a given number of times (a
kernel's inner loop: every instruction of it runs once per tile and warp),
by stall reason, and that loop's synchronising instructions in order.

    python3 bench/cuda/ncu_stalls.py SOURCE.csv[.gz] EXECUTIONS [EXECUTIONS ...]
"""

from __future__ import annotations

import collections
import csv
import gzip
import re
import sys

SYNC = re.compile(r"BAR|HGMMA|DEPBAR|SYNCS|WARPGROUP")


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def main() -> int:
    path, wanted = sys.argv[1], [float(x) for x in sys.argv[2:]]
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    header, data = rows[1], rows[2:]
    col = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(number(r[col["Warp Stall Sampling (All Samples)"]]) for r in data)
    print(f"{len(data)} instructions, {total:.0f} samples")
    for want in wanted:
        loop = [r for r in data if number(r[col["Instructions Executed"]]) == want]
        by_reason = collections.Counter()
        for r in loop:
            for h in reasons:
                by_reason[h[6:]] += number(r[col[h]])
        samples = sum(number(r[col["Warp Stall Sampling (All Samples)"]]) for r in loop)
        ops = collections.Counter(r[1].split()[1 if r[1].strip().startswith("@") else 0].split(".")[0] for r in loop)
        print(f"\nexecuted {want:.0f} times: {len(loop)} instructions, {samples:.0f} samples ({100 * samples / total:.1f}%)")
        print("  by reason: " + ", ".join(f"{k} {v:.0f}" for k, v in by_reason.most_common() if v >= 0.01 * samples))
        print("  by opcode: " + ", ".join(f"{k} {v}" for k, v in ops.most_common(12)))
        for i, r in enumerate(loop):
            if SYNC.search(r[1]):
                print(f"  {i:4d} {number(r[col['Warp Stall Sampling (All Samples)']]):7.0f}  {r[1].strip()[:80]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
