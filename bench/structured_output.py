#!/usr/bin/env python3
"""What structured output costs (BENCHMARKS.md §8): per-token time (TPOT) of
schema-constrained requests against the same requests unconstrained, at 1
and 64 concurrent requests; a schema's compile time cold and cached, and its
effect on the time to the first token (TTFT). Starts `exactly serve` on a
free port, streams every request, reports medians over --repeats runs.

    bench/structured_output.py [-m MODEL] [--device cpu|cuda] [--repeats 3] [--json OUT]

TPOT of a request is (last token time - first token time) / (tokens - 1),
from its stream. Both arms generate up to --max-tokens tokens; the
constrained arm stops where its JSON document ends, so the arms are compared
per token, not per request.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "object", "properties": {
    "title": {"type": "string", "maxLength": 60},
    "steps": {"type": "array", "minItems": 8, "maxItems": 12, "items": {"type": "object", "properties": {
        "action": {"type": "string", "maxLength": 80},
        "minutes": {"type": "integer", "minimum": 1, "maximum": 120},
        "tools": {"type": "array", "maxItems": 3, "items": {"enum": ["knife", "pan", "oven", "bowl", "spoon"]}}},
        "required": ["action", "minutes", "tools"]}}},
    "required": ["title", "steps"], "additionalProperties": False}
PROMPT = "Write a detailed recipe for a vegetable soup, step by step, as JSON."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [str(args.exactly), "serve", "-m", args.model, "--port", str(port), "--max-num-seqs", "64"]
    if args.device != "cpu":
        cmd += ["--device", args.device]
    if args.threads:
        cmd += ["-t", str(args.threads)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited: {proc.stderr.read()[-2000:]}")
        try:
            if requests.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except requests.ConnectionError:
            time.sleep(0.2)
    proc.kill()
    sys.exit("server did not start")


def stream(url: str, body: dict) -> dict:
    """One streamed chat request: TTFT, TPOT and token count."""
    t0 = time.perf_counter()
    times = []
    with requests.post(url + "/v1/chat/completions", json=dict(body, stream=True), stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data: {"):
                continue
            chunk = json.loads(line[6:])
            for c in chunk["choices"]:
                n = len(c.get("token_ids") or [])
                times += [time.perf_counter()] * n
    tokens = len(times)
    return {"ttft": times[0] - t0 if times else float("nan"), "tokens": tokens,
            "tpot": (times[-1] - times[0]) / (tokens - 1) if tokens > 1 else float("nan")}


TEMPERATURE = 0.8


def body(constrained: bool, seed: int, max_tokens: int, schema=SCHEMA) -> dict:
    b = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": max_tokens, "temperature": TEMPERATURE,
         "seed": seed, "return_token_ids": True}
    if constrained:
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "recipe", "schema": schema}}
    else:
        b["ignore_eos"] = True
    return b


# The engine's own account of a run (/metrics counters), per iteration:
# its whole time, the forward pass's, the wait for grammar masks, and per mask.
ENGINE_COUNTERS = ("exactly_engine_steps_total", "exactly_engine_step_seconds_total",
                   "exactly_engine_forward_seconds_total", "exactly_grammar_masks_total",
                   "exactly_grammar_mask_seconds_total", "exactly_grammar_mask_wait_seconds_total")


def tpot_run(url: str, concurrency: int, constrained: bool, max_tokens: int, seed0: int) -> dict:
    before, t0 = metrics(url, ENGINE_COUNTERS), time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(lambda i: stream(url, body(constrained, seed0 + i, max_tokens)), range(concurrency)))
    wall = time.perf_counter() - t0
    delta = {k: v - before[k] for k, v in metrics(url, ENGINE_COUNTERS).items()}
    steps, masks = max(delta["exactly_engine_steps_total"], 1), max(delta["exactly_grammar_masks_total"], 1)
    return {"tpot": statistics.median(r["tpot"] for r in results),
            "ttft": statistics.median(r["ttft"] for r in results),
            "tokens": statistics.median(r["tokens"] for r in results),
            "wall": wall / steps,
            "step": delta["exactly_engine_step_seconds_total"] / steps,
            "forward": delta["exactly_engine_forward_seconds_total"] / steps,
            "mask_wait": delta["exactly_grammar_mask_wait_seconds_total"] / steps,
            "mask": delta["exactly_grammar_mask_seconds_total"] / masks}


def metrics(url: str, names) -> dict:
    values = dict.fromkeys(names, float("nan"))
    for line in requests.get(url + "/metrics", timeout=10).text.splitlines():
        name, _, value = line.partition(" ")
        if name in values:
            values[name] = float(value)
    return values


def metric(url: str, name: str) -> float:
    return metrics(url, (name,))[name]


def compile_run(url: str, i: int) -> dict:
    """A schema never seen (its title's maxLength is unique) compiled cold, then the same one cached."""
    schema = json.loads(json.dumps(SCHEMA))
    schema["properties"]["title"]["maxLength"] = 61 + i
    before = metric(url, "exactly_grammar_compile_seconds_total")
    cold = stream(url, body(True, i, 1, schema))["ttft"]
    compile_s = metric(url, "exactly_grammar_compile_seconds_total") - before
    cached = stream(url, body(True, i, 1, schema))["ttft"]
    plain = stream(url, body(False, i, 1))["ttft"]
    return {"compile": compile_s, "ttft_cold": cold, "ttft_cached": cached, "ttft_plain": plain}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--exactly", default=str(Path(os.environ.get("EXACTLY_BUILD_DIR", ROOT / "build")) / "bin/exactly"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("-t", "--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--concurrency", default="1,64")
    ap.add_argument("--temperature", type=float, default=0.8,
                    help="0: greedy, where an unconstrained row needs only its argmax and a constrained one its whole row")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    global TEMPERATURE
    TEMPERATURE = args.temperature
    proc, url = start_server(args)
    out = {"device": args.device, "model": Path(args.model).name, "repeats": args.repeats,
           "temperature": args.temperature, "tpot": {}}
    try:
        stream(url, body(True, 0, 8))  # compiles SCHEMA and warms the server
        for conc in (int(c) for c in args.concurrency.split(",")):
            runs = {"plain": [], "constrained": []}
            for r in range(args.repeats):
                for arm in ("plain", "constrained"):
                    runs[arm].append(tpot_run(url, conc, arm == "constrained", args.max_tokens, 1000 * r))
            med = {arm: {k: statistics.median(x[k] for x in v) for k in v[0]} for arm, v in runs.items()}
            med["overhead"] = med["constrained"]["tpot"] / med["plain"]["tpot"] - 1
            out["tpot"][conc] = med
            print(f"{conc:3d} concurrent: TPOT plain {med['plain']['tpot'] * 1e3:7.2f} ms, constrained "
                  f"{med['constrained']['tpot'] * 1e3:7.2f} ms ({med['overhead']:+.1%}); tokens/request "
                  f"{med['plain']['tokens']:.0f} / {med['constrained']['tokens']:.0f}", flush=True)
            for arm in ("plain", "constrained"):
                m = med[arm]
                print(f"    {arm:11s} wall {m['wall'] * 1e3:6.3f} ms a step; engine step {m['step'] * 1e3:6.3f} ms: "
                      f"forward {m['forward'] * 1e3:6.3f} ms (waiting for masks {m['mask_wait'] * 1e3:6.3f}), "
                      f"host {(m['step'] - m['forward']) * 1e3:6.3f} ms; a mask {m['mask'] * 1e6:6.1f} us", flush=True)
        comp = [compile_run(url, i) for i in range(args.repeats)]
        out["compile"] = {k: statistics.median(c[k] for c in comp) for k in comp[0]}
        c = out["compile"]
        print(f"schema compile {c['compile'] * 1e3:.1f} ms; TTFT cold {c['ttft_cold'] * 1e3:.1f} ms, cached "
              f"{c['ttft_cached'] * 1e3:.1f} ms, unconstrained {c['ttft_plain'] * 1e3:.1f} ms")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
