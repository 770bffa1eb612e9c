#!/usr/bin/env python3
"""Sums the kernel times of an engine step (bench/cuda/ncu_step.sh).

Reads Nsight Compute's CSV of gpu__time_duration per kernel launch and takes
one step (--step, default the first): from an embedding lookup to the next. Prints each
kind of kernel's launches, total time and share, and for the matrix
products the rate they reached over the step's tokens.
"""
import argparse
import csv
import io
import re
import sys

KINDS = [  # (label, pattern on the kernel's name), first match wins
    ("embedding", r"embedding"),
    ("rmsnorm", r"rmsnorm"),
    ("rope + KV store", r"rope"),
    ("attention (prefill)", r"flash_prefill"),
    ("attention (decode)", r"paged_decode|merge_partitions"),
    ("swiglu", r"swiglu"),
    ("sampling / argmax", r"sampl|argmax|gumbel|top_k|verify"),
    ("matrix products (cuBLASLt)", r"gemm|sm90_xmma|cutlass|nvjet|gemv"),
]


def read_rows(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        sys.exit(f"{path}: no CSV table from ncu (see ncu.log)")
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    out = []
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        out.append((r["Kernel Name"], float(r["Metric Value"].replace(",", ""))))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("--tokens", type=int, required=True, help="tokens the step computes")
    ap.add_argument("--step", type=int, default=0, help="which step, from 0")
    ap.add_argument("--gemm-tflop", type=float, default=None,
                    help="the step's matrix-product work in TFLOP (default: Llama-3-8B's layers, 2 x 6.98e9 x tokens)")
    a = ap.parse_args()
    rows = read_rows(a.csv)
    starts = [i for i, (name, _) in enumerate(rows) if "embedding" in name]
    if not starts:
        sys.exit("no embedding lookup: no engine step in the profile")
    if a.step >= len(starts):
        sys.exit(f"step {a.step}: the profile holds {len(starts)} steps")
    end = starts[a.step + 1] if a.step + 1 < len(starts) else len(rows)
    step = rows[starts[a.step]:end]
    totals = {}
    for name, ns in step:
        label = next((k for k, pat in KINDS if re.search(pat, name)), "other: " + name[:60])
        n, t = totals.get(label, (0, 0.0))
        totals[label] = (n + 1, t + ns)
    whole = sum(t for _, t in totals.values())
    print(f"step {a.step}: {len(step)} kernels, {whole / 1e6:.3f} ms of kernel time, {a.tokens} tokens")
    for label, (n, t) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"  {label:32s} {n:5d} launches {t / 1e6:9.3f} ms {100 * t / whole:6.1f}%")
    # The products of a layer come in the model's order (qkv, o, gate/up,
    # down), then the head: each one's time, and its weights' bytes per
    # second (Llama-3-8B's shapes, bf16).
    products = [ns for name, ns in step if re.search(KINDS[-1][1], name)]
    if len(products) % 4 == 1:
        shapes = {"qkv": 6144 * 4096, "o": 4096 * 4096, "gate/up": 2 * 14336 * 4096, "down": 4096 * 14336}
        layers = len(products) // 4
        for j, (label, params) in enumerate(shapes.items()):
            t = sum(products[j:4 * layers:4])
            print(f"    {label:8s} {t / 1e6:8.3f} ms  {2 * params * layers / t / 1e3:6.2f} TB/s of weights")
        print(f"    head     {products[-1] / 1e6:8.3f} ms  {2 * 128256 * 4096 / products[-1] / 1e3:6.2f} TB/s of weights")
    gemm = totals.get("matrix products (cuBLASLt)")
    if gemm:
        tflop = a.gemm_tflop if a.gemm_tflop is not None else 2 * 6.98e9 * a.tokens / 1e12
        print(f"  matrix products: {tflop:.1f} TFLOP (the layers') in {gemm[1] / 1e6:.3f} ms: "
              f"{tflop / (gemm[1] / 1e9):.0f} TFLOP/s")


if __name__ == "__main__":
    main()
