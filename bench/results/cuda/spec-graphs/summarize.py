#!/usr/bin/env python3
"""Medians per workload and configuration of a run.sh stats folder:
    summarize.py DIR CONFIG...   (the first configuration is the baseline)"""
import glob, json, statistics, sys

d, *cfgs = sys.argv[1:]
wls = sorted({f.split("/")[-1].split("-", 1)[1].rsplit("-", 1)[0] for f in glob.glob(f"{d}/plain-*.json")},
             key=lambda w: (w.split("_")[0], w.split("_")[1], int(w.split("_n")[1])))
for wl in wls:
    base = None
    for c in cfgs:
        rs = [json.load(open(f)) for f in sorted(glob.glob(f"{d}/{c}-{wl}-*.json"))]
        if not rs:
            continue
        tps = statistics.median(r["output_tokens_per_second"] for r in rs)
        base = base or tps
        acc = statistics.median(r["spec_acceptance_rate"] for r in rs)
        ln = statistics.median(r["spec_mean_accepted_length"] for r in rs)
        print(f"| {wl} | {c} | {len(rs)} | {tps:.1f} | {tps / base:.2f} | {acc:.2f} | {ln:.2f} |")
