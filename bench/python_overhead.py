#!/usr/bin/env python3
"""The Python package's overhead against `exactly batch` on the same requests.

Both run the same engine on the same workload (seeded sampling, ignore_eos, so
every run generates the same tokens): `exactly batch` reports its engine loop's
time (after loading and parsing); here LLM.generate() is timed around the call
(after loading; tokenizing the text prompts is inside it). The two alternate,
REPEATS times each, and the figure is the median of the per-pair ratios of
output tokens per second, Python over CLI. Because other work on a shared
machine moves both figures by more than the overhead, the Python side also
times each engine step: the share of generate()'s time spent outside the
engine's steps (in Python: submitting, tokenizing, folding outputs) is the
overhead itself, whatever the machine's load.

  EXACTLY_BUILD_DIR=build .venv/bin/python bench/python_overhead.py [--requests 64] [--max-tokens 64] [--repeats 5] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("EXACTLY_BUILD_DIR", REPO / "build"))
sys.path.insert(0, str(BUILD / "python"))

from exactly import LLM, SamplingParams  # noqa: E402

WORDS = "the sea wind over grey water carries salt and light across a quiet harbour at dawn".split()


def workload(n: int, max_tokens: int) -> list[dict]:
    out = []
    for i in range(n):
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(40 + i % 50)]
        out.append({"prompt": " ".join(words), "max_tokens": max_tokens, "temperature": 0.8, "seed": i,
                    "ignore_eos": True})
    return out


def run_cli(model: str, requests_file: Path, threads: int, kv: str, device: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        subprocess.run([str(BUILD / "bin" / "exactly"), "batch", "-m", model, "-i", str(requests_file),
                        "-o", str(Path(tmp) / "out.jsonl"), "--stats", str(stats), "-t", str(threads),
                        "--kv-cache-memory", kv, "--device", device], check=True, capture_output=True)
        s = json.loads(stats.read_text())
    return s["generated_tokens"] / s["elapsed_seconds"]


class StepTimer:
    """The engine with the time inside its steps summed."""

    def __init__(self, engine):
        self._engine, self.seconds = engine, 0.0

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def step(self):
        start = time.perf_counter()
        out = self._engine.step()
        self.seconds += time.perf_counter() - start
        return out

    def step_folding(self, mine):  # generate()'s step: outputs folded in the engine
        start = time.perf_counter()
        out = self._engine.step_folding(mine)
        self.seconds += time.perf_counter() - start
        return out


def run_python(llm: LLM, bodies: list[dict]) -> tuple[float, float, float]:
    """Output tokens per second, the share of the time spent outside the
    engine's steps, and that time per output token in microseconds (what the
    Python side costs a token, whatever the engine's speed)."""
    prompts = [b["prompt"] for b in bodies]
    params = [SamplingParams(max_tokens=b["max_tokens"], temperature=b["temperature"], seed=b["seed"],
                             ignore_eos=True) for b in bodies]
    timer = StepTimer(llm._engine)
    llm._engine = timer
    start = time.perf_counter()
    outs = llm.generate(prompts, params)
    elapsed = time.perf_counter() - start
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    return tokens / elapsed, 1 - timer.seconds / elapsed, (elapsed - timer.seconds) / tokens * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.environ.get("EXACTLY_MODEL", str(REPO / "models/SmolLM2-135M-Instruct.Q4_1.gguf")))
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv-cache-memory", default="1GiB")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = ap.parse_args()
    bodies = workload(a.requests, a.max_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        requests_file = Path(tmp) / "requests.jsonl"
        requests_file.write_text("".join(json.dumps(b) + "\n" for b in bodies))
        # A fresh engine per Python run, as each CLI run has one (an empty prefix cache).
        cli, py, outside, per_token = [], [], [], []
        for _ in range(a.repeats):
            cli.append(run_cli(a.model, requests_file, a.threads, a.kv_cache_memory, a.device))
            llm = LLM(model=a.model, device=a.device, threads=a.threads, kv_cache_memory=a.kv_cache_memory)
            rate, share, us = run_python(llm, bodies)
            py.append(rate)
            outside.append(share)
            per_token.append(us)
            del llm
    ratios = [p / c for p, c in zip(py, cli)]
    print(json.dumps({"device": a.device, "requests": a.requests, "max_tokens": a.max_tokens, "threads": a.threads,
                      "cli_tokens_per_s": cli, "python_tokens_per_s": py,
                      "median_cli": statistics.median(cli), "median_python": statistics.median(py),
                      "median_ratio_python_over_cli": statistics.median(ratios),
                      "share_outside_steps": outside, "median_share_outside_steps": statistics.median(outside),
                      "outside_us_per_token": per_token,
                      "median_outside_us_per_token": statistics.median(per_token),
                      "load_average": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
