"""Engine-level checks of the CUDA backend on the GPU (run by scripts/gpu-check):
the `exactly` binary with --device cuda against itself with --device cpu (the
oracle, tested against float64 references in CI) on the default model.

1. Logits at every position of several prompts, through the prefill kernel
   (one pass, and chunks of 7 tokens over a cached prefix) and the split-KV
   decode kernel (chunks of 1): relative L2 error per position at most
   MAX_REL, on average at most MEAN_REL; the argmax equal wherever the CPU's
   top-2 gap exceeds GAP.
2. Greedy generation through the batched engine: each request's tokens equal
   the CPU engine's up to the end, or up to a position whose CPU top-2 gap is
   below GAP (a near-tie that bf16 weights may flip); again with 48 tokens per
   step, so that steps hold decode rows beside prompt chunks (each kind of
   run through its own attention kernel).
3. --deterministic: a batch of mixed requests (greedy and seeded sampling,
   short and long prompts) gives bit-identical tokens to each request alone.
4. Speculation: greedy tokens with --spec ngram, layerskip:8 and
   draft:PATH (the model's first 8 layers, written by `exactly export`, on
   the GPU too) equal those without (--deterministic, so both runs compute
   each row in the same order).
5. CUDA graphs: decode and verify steps replayed from graphs give the tokens of eager
   launches, bit for bit (--deterministic, mixed batch).
6. Sampling on the GPU: seeded requests (temperatures 0.5-1.5, top-k, top-p,
   min-p alone and together, repetition/frequency/presence penalties, greedy
   with penalties) give the same tokens as with EXACTLY_CUDA_SAMPLING=0,
   where the host's Sampler draws from the same GPU logits with the same
   uniforms. Only a draw within ~1e-12 of a cumulative boundary may differ
   (summation order); none is expected in a few thousand draws.
7. Programmatic dependent launch changes no arithmetic: tokens with
   EXACTLY_CUDA_PDL=0 equal the default's.
8. Speculative verification on the GPU: seeded sampled requests (and greedy
   ones with penalties) with --spec ngram, layerskip:8 and draft:PATH give
   the same tokens as with EXACTLY_CUDA_SAMPLING=0, where the host's
   rejection sampler verifies the same GPU logits with the same uniforms.

The bf16 tolerances: the GPU holds the weights in bf16 (rounding each weight
by up to 2^-9 relative), the CPU computes with the file's exact values, so
logits differ by about 1% of their norm on average (measured: 0.8-2.5%),
more at a few positions of long contexts, where the bf16 K/V cache (the CPU
keeps fp32) adds its rounding (measured: up to 8% at one position of 1321).
A wrong rotary layout, a misplaced KV slot or a broken attention tile moves
them by 30-100%.

    python3 tests/cuda/check_model.py --exactly BIN --model GGUF [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from check_report import Report, run

MAX_REL = 0.12   # relative L2 error of a position's logits, GPU vs CPU, at any position
MEAN_REL = 0.03  # ... averaged over a prompt's positions
GAP = 0.5       # top-2 logit gap (nats) above which the argmax must agree

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "Il était une fois, dans un petit village au bord de la mer, une vieille femme qui",
]
LONG_TEXT = ("Paged attention keeps the KV cache in fixed-size blocks behind block tables, so memory is allocated "
             "as sequences grow and shared between requests with a common prefix. ") * 40

REPORT = Report()
record = REPORT.record


def tokenize(exe: str, model: str, text: str) -> list[int]:
    return json.loads(run([exe, "tokenize", "-m", model, "--json", text]).stdout)


def logits(exe: str, model: str, device: str, ids: list[int], chunk: int, vocab: int, tmp: Path) -> np.ndarray:
    out = tmp / f"logits-{device}-{chunk}.bin"
    run([exe, "logits", "-m", model, "--device", device, "--chunk", str(chunk), "--tokens",
         ",".join(map(str, ids)), "-o", str(out)])
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), vocab)


def top2_gap(row: np.ndarray) -> float:
    a = np.partition(row, -2)[-2:]
    return float(a[1] - a[0])


def check_logits(exe: str, model: str, vocab: int, tmp: Path):
    cases = [(p, None) for p in PROMPTS] + [(LONG_TEXT, None)]
    for i, (text, _) in enumerate(cases):
        ids = tokenize(exe, model, text)
        cpu = logits(exe, model, "cpu", ids, 512, vocab, tmp)
        chunks = [512, 7, 1] if len(ids) < 200 else [512, 7]
        for chunk in chunks:
            gpu = logits(exe, model, "cuda", ids, chunk, vocab, tmp)
            finite = bool(np.isfinite(gpu).all())
            rel = np.linalg.norm((gpu - cpu).astype(np.float64), axis=1) / np.linalg.norm(cpu.astype(np.float64), axis=1)
            gaps = np.array([top2_gap(r) for r in cpu])
            decided = gaps > GAP
            agree = (gpu.argmax(1) == cpu.argmax(1))[decided]
            ok = finite and float(rel.max()) <= MAX_REL and float(rel.mean()) <= MEAN_REL and bool(agree.all())
            record(f"logits prompt {i} ({len(ids)} tokens) chunk {chunk}", ok, max_rel=f"{rel.max():.4f}",
                   worst_position=int(rel.argmax()), worst_cpu_gap=f"{gaps[int(rel.argmax())]:.3f}",
                   mean_rel=f"{rel.mean():.4f}", argmax_checked=int(decided.sum()), argmax_disagree=int((~agree).sum()))


def batch(exe: str, model: str, requests: list[dict], extra: list[str], tmp: Path, name: str,
          env: dict | None = None) -> list[list[int]]:
    inp, out = tmp / f"{name}.jsonl", tmp / f"{name}-out.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in requests))
    run([exe, "batch", "-m", model, "-i", str(inp), "-o", str(out), *extra],
        env=None if env is None else {**os.environ, **env})
    lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return [line["choices"][0]["token_ids"] for line in lines]


def compare_greedy(exe: str, model: str, vocab: int, tmp: Path, name: str, prompts: list[str],
                   cpu: list[list[int]], gpu: list[list[int]]):
    for i, (c, g) in enumerate(zip(cpu, gpu)):
        n = next((j for j in range(min(len(c), len(g))) if c[j] != g[j]), None)
        if n is None:
            record(f"{name} request {i}", c == g, tokens=len(c), identical=True)
            continue
        # Diverged at generated token n: it must have been a near-tie for the CPU.
        ids = tokenize(exe, model, prompts[i]) + c[:n]
        row = logits(exe, model, "cpu", ids, 512, vocab, tmp)[-1]
        gap = top2_gap(row)
        record(f"{name} request {i}", gap <= GAP, tokens=len(c), first_difference=n, cpu_gap=f"{gap:.3f}")


def check_greedy(exe: str, model: str, vocab: int, tmp: Path):
    reqs = [{"prompt": p, "max_tokens": 48, "temperature": 0, "ignore_eos": True} for p in PROMPTS]
    cpu = batch(exe, model, reqs, ["--device", "cpu"], tmp, "greedy-cpu")
    gpu = batch(exe, model, reqs, ["--device", "cuda"], tmp, "greedy-cuda")
    compare_greedy(exe, model, vocab, tmp, "greedy", PROMPTS, cpu, gpu)


def check_mixed_steps(exe: str, model: str, vocab: int, tmp: Path):
    """Steps that hold decode rows and prompt chunks together: with a budget of
    48 tokens per step the long prompts are prefilled in chunks while the short
    requests decode, so the GPU runs the decode kernel on runs of decode rows
    and the prefill kernel on the chunks within one step."""
    prompts = PROMPTS + [LONG_TEXT[:1500], "Hi", LONG_TEXT[:300]]
    reqs = [{"prompt": p, "max_tokens": 40, "temperature": 0, "ignore_eos": True} for p in prompts]
    budget = ["--max-num-batched-tokens", "48"]
    cpu = batch(exe, model, reqs, ["--device", "cpu"], tmp, "mixed-cpu")
    gpu = batch(exe, model, reqs, ["--device", "cuda", *budget], tmp, "mixed-cuda")
    compare_greedy(exe, model, vocab, tmp, "mixed steps", prompts, cpu, gpu)


def mixed_requests() -> list[dict]:
    reqs = []
    for i, p in enumerate(PROMPTS + [LONG_TEXT[:1500], "Hi", LONG_TEXT[:300]]):
        r = {"prompt": p, "max_tokens": 24 + 4 * i, "ignore_eos": True}
        r.update({"temperature": 0} if i % 2 == 0 else {"temperature": 0.8, "top_p": 0.95, "seed": 100 + i})
        reqs.append(r)
    return reqs


def check_batch_invariance(exe: str, model: str, tmp: Path):
    reqs = mixed_requests()
    det = ["--device", "cuda", "--deterministic"]
    together = batch(exe, model, reqs, det + ["--max-num-batched-tokens", "256"], tmp, "together")
    alone = [batch(exe, model, [r], det, tmp, f"alone-{i}")[0] for i, r in enumerate(reqs)]
    same = [a == t for a, t in zip(alone, together)]
    record("deterministic: batched == alone", all(same), requests=len(reqs), identical=sum(same))


def check_speculation(exe: str, model: str, tmp: Path):
    text = ("Please copy this sentence exactly: the quick brown fox jumps over the lazy dog near the river bank. "
            "Copy: the quick brown fox")
    reqs = [{"prompt": text, "max_tokens": 40, "temperature": 0, "ignore_eos": True},
            {"prompt": PROMPTS[1], "max_tokens": 40, "temperature": 0, "ignore_eos": True}]
    det = ["--device", "cuda", "--deterministic"]
    plain = batch(exe, model, reqs, det, tmp, "spec-off")
    draft = tmp / "draft.gguf"
    run([exe, "export", "-m", model, "--layers", "8", "-o", str(draft)])
    for method in ("ngram", "layerskip:8", f"draft:{draft}"):
        spec = batch(exe, model, reqs, det + ["--spec", method, "--num-speculative-tokens", "4",
                                              "--no-adaptive-speculation"], tmp, "spec-on")
        record(f"speculation ({method.split(':')[0]}) greedy == plain greedy", plain == spec,
               identical=sum(a == b for a, b in zip(plain, spec)), requests=len(reqs))


def check_graphs(exe: str, model: str, tmp: Path):
    reqs = mixed_requests()
    det = ["--device", "cuda", "--deterministic"]
    graphs = batch(exe, model, reqs, det, tmp, "graphs")
    eager = batch(exe, model, reqs, det + ["--enforce-eager"], tmp, "eager")
    record("CUDA graphs == eager launches", graphs == eager, identical=sum(a == b for a, b in zip(graphs, eager)),
           requests=len(reqs))
    # Verifies of 1 + k tokens replay graphs too, padded to a query length
    # (k = 12: 13 tokens padded to 16) and a batch size of their own.
    for k in ("4", "12"):
        spec = det + ["--spec", "ngram", "--num-speculative-tokens", k, "--no-adaptive-speculation"]
        graphs = batch(exe, model, reqs, spec, tmp, f"graphs-spec{k}")
        eager = batch(exe, model, reqs, spec + ["--enforce-eager"], tmp, f"eager-spec{k}")
        record(f"CUDA graphs == eager launches (ngram, k = {k})", graphs == eager,
               identical=sum(a == b for a, b in zip(graphs, eager)), requests=len(reqs))


def sampling_requests() -> list[dict]:
    settings = [
        {"temperature": 0.5, "top_k": 0, "top_p": 1.0, "min_p": 0.0},
        {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0},
        {"temperature": 1.5, "top_k": 0, "top_p": 1.0, "min_p": 0.0},
        {"temperature": 1.0, "top_k": 40, "top_p": 1.0, "min_p": 0.0},
        {"temperature": 1.0, "top_k": 0, "top_p": 0.9, "min_p": 0.0},
        {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.05},
        {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05},
        {"temperature": 1.0, "repetition_penalty": 1.3, "frequency_penalty": 0.5, "presence_penalty": 0.3},
        {"temperature": 0, "repetition_penalty": 1.3, "frequency_penalty": 0.5},
    ]
    reqs = []
    for i in range(36):
        r = {"prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": 64, "ignore_eos": True, "seed": 1000 + i}
        r.update(settings[i % len(settings)])
        reqs.append(r)
    return reqs


def check_gpu_sampling(exe: str, model: str, tmp: Path):
    reqs = sampling_requests()
    gpu = batch(exe, model, reqs, ["--device", "cuda"], tmp, "sample-gpu")
    host = batch(exe, model, reqs, ["--device", "cuda"], tmp, "sample-host", env={"EXACTLY_CUDA_SAMPLING": "0"})
    same = [a == b for a, b in zip(gpu, host)]
    record("GPU sampling == host sampling on the same logits", all(same), requests=len(reqs),
           identical=sum(same), draws=sum(len(t) for t in host))
    # The GPU's draws must be actual samples: seeded requests at temperature
    # 1 differ from the greedy run.
    greedy = batch(exe, model, [{**r, "temperature": 0} for r in reqs[:8]], ["--device", "cuda"], tmp, "sample-greedy")
    record("sampled requests differ from greedy", sum(a != b for a, b in zip(gpu[:8], greedy)) >= 6)


def check_gpu_verify(exe: str, model: str, tmp: Path):
    reqs = [r for r in sampling_requests() if r["temperature"] > 0 or r.get("repetition_penalty", 1) != 1][:24]
    text = ("Please copy this sentence exactly: the quick brown fox jumps over the lazy dog near the river bank. "
            "Copy: the quick brown fox")
    reqs += [{"prompt": text, "max_tokens": 48, "ignore_eos": True, "seed": 7 + i, "temperature": t}
             for i, t in enumerate((0.3, 0.7, 1.0))]
    draft = tmp / "draft.gguf"
    if not draft.exists():
        run([exe, "export", "-m", model, "--layers", "8", "-o", str(draft)])
    for method in ("ngram", "layerskip:8", f"draft:{draft}"):
        spec = ["--device", "cuda", "--spec", method, "--num-speculative-tokens", "3", "--no-adaptive-speculation"]
        name = method.split(":")[0]
        gpu = batch(exe, model, reqs, spec, tmp, f"verify-gpu-{name}")
        host = batch(exe, model, reqs, spec, tmp, f"verify-host-{name}", env={"EXACTLY_CUDA_SAMPLING": "0"})
        same = [a == b for a, b in zip(gpu, host)]
        record(f"speculation ({name}) verified on the GPU == on the host", all(same), requests=len(reqs),
               identical=sum(same), draws=sum(len(t) for t in host))


def check_dependent_launch(exe: str, model: str, tmp: Path):
    reqs = mixed_requests()
    on = batch(exe, model, reqs, ["--device", "cuda"], tmp, "pdl-on")
    off = batch(exe, model, reqs, ["--device", "cuda"], tmp, "pdl-off", env={"EXACTLY_CUDA_PDL": "0"})
    record("dependent launch == plain launches", on == off, identical=sum(a == b for a, b in zip(on, off)),
           requests=len(reqs))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exactly", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--json")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        ids = tokenize(a.exactly, a.model, "x")  # the vocabulary size, from one row of logits
        run([a.exactly, "logits", "-m", a.model, "--tokens", ",".join(map(str, ids)), "-o", str(tmp / "p.bin")])
        vocab = (tmp / "p.bin").stat().st_size // 4 // len(ids)
        for step in (check_logits, check_greedy, check_mixed_steps):
            step(a.exactly, a.model, vocab, tmp)
        check_batch_invariance(a.exactly, a.model, tmp)
        check_speculation(a.exactly, a.model, tmp)
        check_graphs(a.exactly, a.model, tmp)
        check_gpu_sampling(a.exactly, a.model, tmp)
        check_dependent_launch(a.exactly, a.model, tmp)
        check_gpu_verify(a.exactly, a.model, tmp)
    return REPORT.finish("model checks", a.json)


if __name__ == "__main__":
    sys.exit(main())
