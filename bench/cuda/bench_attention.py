"""Speed of the CUDA attention kernels beside PyTorch's, in the same run
(run by scripts/gpu-check). Times are medians of CUDA-event timings after a
warm-up; inputs are random (never zeros).

Our kernel and each PyTorch backend take turns within every repetition
(interleaved_medians), so a ratio never compares timings taken at different
clocks.

Prefill: batch x 32 heads x L tokens, head dims 64/128, causal or not; ours
through the paged layout (block size 16, a shuffled block table), PyTorch's
FlashAttention-2 and cuDNN backends on contiguous tensors. FLOPs counted as
4*B*H*L^2*d (halved when causal).

Decode: 32 query / 8 KV heads, d = 128, one token per sequence; ours through
the block table, PyTorch's cuDNN (and FlashAttention-2) backend with
enable_gqa on contiguous K/V. Bytes counted as the K and V each sequence
reads once (q and out are negligible).

    python3 bench/cuda/bench_attention.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "cuda"))
from kernels_lib import decode_workspace, load_library, make_batch, run_decode, run_prefill  # noqa: E402

COPY_TBS, BF16_TFLOPS = 4.22, 790.0  # the card's measured ceilings (docs/DEVICE notes in BENCHMARKS.md)


def interleaved_medians(runs, reps=20, warmup=3, inner=10):
    """Median over reps of the mean time of `inner` back-to-back calls, for
    each of `runs` (name -> run(n): n calls in a row, or None). The contenders
    take turns within every rep, in an order that rotates, so each is timed
    under the same clocks and temperature: run one after another, a kernel
    timed after a cooler one found the card at a higher clock. The host
    (Python, ctypes) stays ahead of the GPU, so launch latency is not counted
    as kernel time, for our kernels and PyTorch's alike. A contender that
    raises at its first call is reported as not available (None)."""
    live = {}
    for name, run in runs.items():
        try:
            run(warmup)
            live[name] = run
        except RuntimeError as e:
            print(f"  {name}: not available here ({str(e).splitlines()[0][:80]})")
    torch.cuda.synchronize()
    times = {name: [] for name in live}
    names = list(live)
    for r in range(reps):
        for name in names[r % len(names):] + names[:r % len(names)]:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            live[name](inner)
            b.record()
            torch.cuda.synchronize()
            times[name].append(a.elapsed_time(b) / inner)
    med = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
    return {name: med.get(name) for name in runs}


def repeat(fn):
    def run(n):
        for _ in range(n):
            fn()
    return run


def sdpa_runs(q, k, v, causal, **kw):
    def backend(which):
        def run(n):
            with sdpa_kernel([which]):
                for _ in range(n):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)
        return run
    return {"fa2": backend(SDPBackend.FLASH_ATTENTION), "cudnn": backend(SDPBackend.CUDNN_ATTENTION)}


def prefill_row(lib, batch, heads, n, d, causal, reps):
    b = make_batch([n] * batch, [n] * batch, heads, heads, d, torch.bfloat16, block_size=16, seed=n + d)
    out = torch.empty_like(b.q)
    q = torch.randn(batch, heads, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    ms = interleaved_medians({"ours": repeat(lambda: run_prefill(lib, b, causal=causal, out=out)),
                              **sdpa_runs(q, k, v, causal)}, reps)
    flops = 4.0 * batch * heads * n * n * d / (2 if causal else 1)
    tf = lambda ms: None if ms is None else flops / ms / 1e9
    return {"kind": "prefill", "batch": batch, "heads": heads, "L": n, "d": d, "causal": causal,
            "ours_ms": ms["ours"], "fa2_ms": ms["fa2"], "cudnn_ms": ms["cudnn"], "ours_tflops": tf(ms["ours"]),
            "fa2_tflops": tf(ms["fa2"]), "cudnn_tflops": tf(ms["cudnn"])}


def decode_row(lib, batch, ctx, reps, heads=32, kv=8, d=128, block_size=16):
    b = make_batch([1] * batch, [ctx] * batch, heads, kv, d, torch.bfloat16, block_size=block_size, seed=ctx)
    out = torch.empty_like(b.q)
    ws = decode_workspace(lib, b)
    q = torch.randn(batch, heads, 1, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, kv, ctx, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    ms = interleaved_medians({"ours": repeat(lambda: run_decode(lib, b, out=out, workspace=ws)),
                              **sdpa_runs(q, k, v, False, enable_gqa=True)}, reps)
    nbytes = 2.0 * batch * ctx * kv * d * 2
    tbs = lambda ms: None if ms is None else nbytes / ms / 1e9
    return {"kind": "decode", "batch": batch, "ctx": ctx, "heads": heads, "kv_heads": kv, "d": d,
            "block_size": block_size, "ours_ms": ms["ours"], "cudnn_ms": ms["cudnn"], "fa2_ms": ms["fa2"],
            "ours_tbs": tbs(ms["ours"]), "cudnn_tbs": tbs(ms["cudnn"]), "fa2_tbs": tbs(ms["fa2"])}


def fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    lib = load_library()
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = []
    reps = 5 if args.quick else 20
    decode_shapes = [(64, 2048), (16, 8192)] + ([] if args.quick else [(128, 1024), (1, 131072), (256, 512)])
    for batch, ctx in decode_shapes:
        rows.append(decode_row(lib, batch, ctx, reps))
    prefill_shapes = [(4, 4096, 128, False), (4, 4096, 128, True)]
    if not args.quick:
        for n in (1024, 2048, 8192, 16384):
            for causal in (False, True):
                prefill_shapes.append((max(1, 16384 // n), n, 128, causal))
        for causal in (False, True):
            prefill_shapes.append((4, 4096, 64, causal))
    for batch, n, d, causal in prefill_shapes:
        rows.append(prefill_row(lib, batch, 32, n, d, causal, reps))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print("\nprefill (bf16, 32 heads, paged block 16 for ours): TFLOP/s, ratio to FA2 / cuDNN")
    for r in rows:
        if r["kind"] == "prefill":
            ratio = lambda o: "-" if o is None else f"{r['ours_tflops'] / o:.2f}"
            print(f"  B={r['batch']:<3} L={r['L']:<6} d={r['d']:<4} causal={int(r['causal'])}  ours "
                  f"{fmt(r['ours_tflops'])}  fa2 {fmt(r['fa2_tflops'])}  cudnn {fmt(r['cudnn_tflops'])}  "
                  f"x{ratio(r['fa2_tflops'])} / x{ratio(r['cudnn_tflops'])}  ({r['ours_tflops'] / BF16_TFLOPS:.0%} "
                  f"of {BF16_TFLOPS:.0f})")
    print("decode (bf16, 32/8 heads, d 128): TB/s of K+V read")
    for r in rows:
        if r["kind"] == "decode":
            print(f"  B={r['batch']:<4} ctx={r['ctx']:<7} ours {fmt(r['ours_tbs'], '.2f')} ({r['ours_ms'] * 1e3:.0f} us,"
                  f" {r['ours_tbs'] / COPY_TBS:.0%} of copy)  cudnn {fmt(r['cudnn_tbs'], '.2f')}  "
                  f"fa2 {fmt(r['fa2_tbs'], '.2f')}")


if __name__ == "__main__":
    main()
