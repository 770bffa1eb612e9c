#!/usr/bin/env python3
"""Per-cell summary of bench/spec_ab.py --json files: for each (cell, proposer)
the per-round geometric mean of spec/none tokens/s with its 95% interval
(t distribution over the rounds' log ratios), the ratio of medians, a
one-sided test of "ratio >= FLOOR" at the 5% level, and the median of the
drafted tokens and drafting seconds.

    bench/spec_cells.py A.json [B.json ...] [--floor 0.95]
"""
import argparse
import json
import math
import statistics

# Two-sided 95% t quantiles (one-sided 97.5%) and one-sided 95% ones, by degrees of freedom.
T975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 19: 2.093, 24: 2.064, 29: 2.045, 39: 2.023}
T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812,
       11: 1.796, 12: 1.782, 13: 1.771, 14: 1.761, 15: 1.753, 19: 1.729, 24: 1.711, 29: 1.699, 39: 1.685}


def quantile(table, df):
    keys = sorted(k for k in table if k <= df)
    return table[keys[-1]] if keys else table[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--floor", type=float, default=0.95)
    args = ap.parse_args()
    print(f"{'cell':<14} {'proposer':<34} {'rounds':>6} {'geo mean':>8} {'95% interval':>15} {'medians':>8}"
          f" {'below floor?':>12} {'drafted':>7} {'draft s':>7}")
    for path in args.files:
        for row in json.load(open(path)):
            logs = [math.log(s / n) for s, n in zip(row["spec_tok_s"], row["none_tok_s"])]
            k = len(logs)
            mean = statistics.fmean(logs)
            sd = statistics.stdev(logs) if k > 1 else float("nan")
            half = quantile(T975, k - 1) * sd / math.sqrt(k) if k > 1 else float("nan")
            # One-sided: the floor is rejected when the upper 95% bound is below it.
            upper = mean + quantile(T95, k - 1) * sd / math.sqrt(k) if k > 1 else float("nan")
            below = "yes" if upper < math.log(args.floor) else "no"
            ratio = statistics.median(row["spec_tok_s"]) / statistics.median(row["none_tok_s"])
            print(f"{row['cell']:<14} {row['spec'][-34:]:<34} {k:>6} x{math.exp(mean):.3f}"
                  f" {math.exp(mean - half):>7.3f}-{math.exp(mean + half):.3f} x{ratio:.3f} {below:>12}"
                  f" {statistics.median(row['drafted']):>7} {statistics.median(row['draft_seconds']):>7.3f}")


if __name__ == "__main__":
    main()
