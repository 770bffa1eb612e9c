#!/usr/bin/env python3
"""What splitting a model over GPUs and hosts would give, predicted from the
single-GPU figures measured here (docs/multi-node.md explains the design).

A decode step of a memory-bound model costs what reading its weights costs
plus what does not shrink with the split. Measured on one H100 (BENCHMARKS
§6, Llama-3-8B's shape, 512 + 128 tokens): ms per decode step at batch 1 /
32 / 128. Split over N GPUs of one host (tensor parallelism), each reads
1/N of the weights, and each layer adds two all-reduces of [batch, dim] bf16
values; over S hosts (pipeline parallelism) each host runs L/S layers and
passes [batch, dim] to the next; R independent replicas (data parallelism)
multiply throughput and leave latency alone.

The collectives' costs are parameters, not measurements (two-GPU machines
were not lent): alpha (fixed latency of one all-reduce) and the NVLink and
network bandwidths. Replace them with nccl-tests' figures when measured.

    python3 bench/tp_scaling_model.py [--alpha-us 9] [--nvlink-gbs 300] [--net-gbs 40]
"""

from __future__ import annotations

import argparse

# Measured: Llama-3-8B shape on an H100, canonical order, ms per decode step
# (bench/results/cuda/production-routing-check/llama-8b-512-canonical.log).
STEP_MS = {1: 6.073, 32: 7.212, 128: 10.345}
LAYERS, DIM = 32, 4096
# What a split does not divide: per step, the batch-1 step less its products
# (5.35 ms: 14.96 GiB at the ~3.0 TB/s they stream) and its attention (0.37
# ms, BENCHMARKS §5), i.e. norms, RoPE, sampling and launch gaps, taken as
# the same at every batch size. Products, attention and KV reads divide:
# each rank holds 1/N of the weights and of the heads.
NOT_DIVIDED_MS = STEP_MS[1] - 5.35 - 0.37


def tp_step_ms(batch: int, ranks: int, alpha_us: float, nvlink_gbs: float) -> float:
    """One host, `ranks` GPUs: all but the undivided part divides, plus 2 all-reduces a layer."""
    base = STEP_MS[batch]
    if ranks == 1:
        return base
    # A ring all-reduce moves 2 (N - 1) / N of the data through each link.
    bytes_ = batch * DIM * 2
    allreduce_us = alpha_us + 2 * (ranks - 1) / ranks * bytes_ / (nvlink_gbs * 1e3)
    return (base - NOT_DIVIDED_MS) / ranks + NOT_DIVIDED_MS + 2 * LAYERS * allreduce_us / 1e3


def pp_step_ms(batch: int, stages: int, tp: int, alpha_us: float, nvlink_gbs: float, net_gbs: float) -> tuple[float, float]:
    """`stages` hosts of `tp` GPUs each: latency of one token (all stages in turn) and
    the time between tokens of the pipeline kept full with `stages` micro-batches."""
    per_stage = tp_step_ms(batch, tp, alpha_us, nvlink_gbs) / stages
    hop_ms = (alpha_us + batch * DIM * 2 / (net_gbs * 1e3)) / 1e3
    latency = stages * per_stage + (stages - 1) * hop_ms
    return latency, per_stage + hop_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alpha-us", type=float, default=9.0, help="fixed latency of one all-reduce / send (us)")
    ap.add_argument("--nvlink-gbs", type=float, default=300.0, help="bus bandwidth of one GPU's NVLink (GB/s)")
    ap.add_argument("--net-gbs", type=float, default=40.0, help="one host's network bandwidth to the next (GB/s)")
    a = ap.parse_args()
    print(f"not divided: {NOT_DIVIDED_MS:.2f} ms a step; alpha {a.alpha_us} us, "
          f"NVLink {a.nvlink_gbs} GB/s, network {a.net_gbs} GB/s\n")
    print("| GPUs (tensor parallel) | batch | ms per step | tokens/s | speed-up |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for batch in STEP_MS:
        for ranks in (1, 2, 4, 8):
            ms = tp_step_ms(batch, ranks, a.alpha_us, a.nvlink_gbs)
            print(f"| {ranks} | {batch} | {ms:.3f} | {batch * 1e3 / ms:,.0f} | {STEP_MS[batch] / ms:.2f}x |")
    print("\n| hosts (pipeline) x GPUs (tensor) | batch | latency per token ms | tokens/s, pipeline full |")
    print("| --- | ---: | ---: | ---: |")
    for stages, tp in ((1, 8), (2, 8), (4, 8)):
        for batch in (1, 128):
            latency, interval = pp_step_ms(batch, stages, tp, a.alpha_us, a.nvlink_gbs, a.net_gbs)
            print(f"| {stages} x {tp} | {batch} | {latency:.3f} | {batch * 1e3 / interval:,.0f} |")
    print("\nData-parallel replicas multiply the tokens/s of their configuration and leave its latency as it is.")


if __name__ == "__main__":
    main()
