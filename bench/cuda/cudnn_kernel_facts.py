"""Which kernel PyTorch's cuDNN attention backend runs at the prefill target
shape, with its launch facts (grid, threads, registers, shared memory) and
duration, from PyTorch's profiler: what dev/cuda/NOTES.md compares v46 with.

    python3 bench/cuda/cudnn_kernel_facts.py [--batch 4] [--heads 32] [--len 4096] [--head-dim 128]
"""

from __future__ import annotations

import argparse
import json
import tempfile

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

FACTS = ("grid", "block", "registers per thread", "shared memory", "blocks per SM", "warps per SM")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--len", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    a = ap.parse_args()
    shape = (a.batch, a.heads, a.len, a.head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            for _ in range(3):
                torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.cuda.synchronize()
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            prof.export_chrome_trace(f.name)
            events = json.load(open(f.name))["traceEvents"]
        flops = 4 * a.batch * a.heads * a.len * a.len * a.head_dim / (2 if causal else 1)
        for e in events:
            if e.get("cat") != "kernel":
                continue
            args = e.get("args", {})
            us = float(e.get("dur", 0))
            print(causal, e["name"], f"dur {us:.1f} us ({flops / us / 1e6:.0f} TFLOP/s)",
                  {key: args.get(key) for key in FACTS})


if __name__ == "__main__":
    main()
