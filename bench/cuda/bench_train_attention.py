"""Speed and memory of the training attention (kernels/cuda/flash_train.h,
through exactly_torch) beside PyTorch's SDPA backends, in the same run.

Batch x length = 16k tokens, 16 heads (8,192 / d of model width), lengths
512 to 16k, head dims 64 and 128, causal and not. Times are medians of
CUDA-event timings with the contenders taking turns within every repetition
(bench_attention.interleaved_medians). FLOPs: forward 4*B*H*L^2*d, backward
2.5 times that, both halved when causal. The backward alone is timed as
forward + backward minus the forward measured in the same repetition's
medians.

Peak memory: torch.cuda.max_memory_allocated over one forward + backward at
4k and 16k tokens (batch 1), ours against SDPA's math backend (the
materialised attention matrix), beside the inputs' own size.

    EXACTLY_KERNELS_LIB=... python3 bench/cuda/bench_train_attention.py [--quick] [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2] / "python")]
from bench_attention import interleaved_medians  # noqa: E402
from exactly_torch import exactly_attention  # noqa: E402

TOKENS, WIDTH = 16384, 2048


def inputs(batch, heads, length, d, grad=True):
    make = lambda: torch.randn(batch, heads, length, d, device="cuda", dtype=torch.bfloat16).requires_grad_(grad)
    return make(), make(), make(), torch.randn(batch, heads, length, d, device="cuda", dtype=torch.bfloat16)


def contenders(causal):
    def sdpa(which):
        def attend(q, k, v):
            with sdpa_kernel([which]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return attend
    return {"exactly": lambda q, k, v: exactly_attention(q, k, v, causal=causal),
            "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
            "flash2": sdpa(SDPBackend.FLASH_ATTENTION)}


def runs_for(attend, q, k, v, d_out, backward):
    def run(n):
        for _ in range(n):
            if backward:
                q.grad = k.grad = v.grad = None
                attend(q, k, v).backward(d_out)
            else:
                with torch.no_grad():
                    attend(q, k, v)
    return run


def speed(length, d, causal, reps):
    batch, heads = TOKENS // length, WIDTH // d
    q, k, v, d_out = inputs(batch, heads, length, d)
    fwd_flops = 4.0 * batch * heads * length * length * d / (2 if causal else 1)
    row = {"length": length, "d": d, "causal": causal, "batch": batch, "heads": heads}
    fns = contenders(causal)
    runs = {}
    for name, attend in fns.items():
        runs[f"{name} fwd"] = runs_for(attend, q, k, v, d_out, backward=False)
        runs[f"{name} fwd+bwd"] = runs_for(attend, q, k, v, d_out, backward=True)
    med = interleaved_medians(runs, reps=reps, warmup=2, inner=3)
    for name in fns:
        f, fb = med[f"{name} fwd"], med[f"{name} fwd+bwd"]
        row[name] = None if f is None or fb is None else {
            "fwd_ms": f, "bwd_ms": fb - f, "fwd_tflops": fwd_flops / f / 1e9,
            "bwd_tflops": 2.5 * fwd_flops / (fb - f) / 1e9}
    return row


def peak_memory(length, d, causal):
    row = {"length": length, "d": d, "causal": causal}
    for name, attend in (("exactly", contenders(causal)["exactly"]),
                         ("math", lambda q, k, v: _math(q, k, v, causal))):
        torch.cuda.empty_cache()
        q, k, v, d_out = inputs(1, WIDTH // d, length, d)
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        try:
            attend(q, k, v).backward(d_out)
            torch.cuda.synchronize()
            row[name] = (torch.cuda.max_memory_allocated() - base) / 2**20
        except torch.OutOfMemoryError:
            row[name] = "out of memory"
        row["inputs_mib"] = 3 * q.numel() * 2 / 2**20
        del q, k, v, d_out
    return row


def _math(q, k, v, causal):
    with sdpa_kernel([SDPBackend.MATH]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="lengths 1k and 4k, d 128 only")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    lengths = [1024, 4096] if args.quick else [512, 1024, 2048, 4096, 8192, 16384]
    dims = [128] if args.quick else [64, 128]
    rows = []
    print(f"{torch.cuda.get_device_name()}; batch x length = {TOKENS}, model width {WIDTH}; TFLOP/s fwd / bwd")
    for d in dims:
        for causal in (False, True):
            for length in lengths:
                r = speed(length, d, causal, args.reps)
                rows.append(r)
                cells = []
                for name in ("exactly", "cudnn", "flash2"):
                    m = r[name]
                    cells.append(f"{name} " + ("n/a" if m is None else
                                               f"{m['fwd_tflops']:6.1f} / {m['bwd_tflops']:6.1f}"))
                ratio = (r["exactly"]["bwd_tflops"] / r["cudnn"]["bwd_tflops"]
                         if r["exactly"] and r["cudnn"] else float("nan"))
                print(f"d {d:3d} {'causal' if causal else 'full  '} L {length:5d}: " + "  ".join(cells)
                      + f"  bwd vs cudnn {ratio:.2f}", flush=True)
    memory = [peak_memory(length, 128, True) for length in (4096, 16384)]
    mib = lambda x: f"{x:.0f} MiB" if isinstance(x, float) else x
    for m in memory:
        print(f"peak memory, fwd+bwd, 1 x {WIDTH // 128} heads x {m['length']} x 128 causal: exactly "
              f"{mib(m['exactly'])}, math {mib(m['math'])} (inputs {m['inputs_mib']:.0f} MiB)")
    if args.json:
        Path(args.json).write_text(json.dumps({"speed": rows, "memory": memory}, indent=1))


if __name__ == "__main__":
    main()
