"""Draft heads on the GPU (`--spec head:PATH --device cuda`): the `exactly`
binary on the real model, against itself without speculation.

1. A random head (F16 weights, like a trained one's): greedy output equal to
   plain greedy output, with graphs and launched from the host, and the head
   drafts.
2. A pass-through head (fc = [0 | I], a layer that adds nothing): g_s is
   h_{s-1} rescaled, whose argmax under the target's head is the target's
   greedy token at s - 1, i.e. x_s, so each draft repeats the newest token and
   how many drafts are accepted follows from the plain output alone; a head
   reading the hidden state of another position would draft other tokens.
   This checks that the GPU target's hidden states and the head's input are
   the right positions' (the prompt makes the answer runs of one digit).
3. Batches of mixed prompts, greedy with logprobs: tokens and logprobs equal
   to plain, and the throughput of both (for the record).

Needs numpy and the gguf package (bench/draft/write_head_gguf.py).

    python3 tests/cuda/check_draft_head.py --exactly BIN --model GGUF [--head TRAINED.gguf] [--device cpu] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

from check_report import Report, run

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "draft"))
from write_head_gguf import random_head, target_shape, write_head  # noqa: E402

REPORT = Report()
record = REPORT.record
DEVICE = "cuda"  # --device: the script runs on the CPU too, where the head's checks hold alike

CHAT = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
DIGITS = CHAT.format("Tell me about the sea.") + "11111, 22222, 33333"
QUESTIONS = ["Name three colours, then name them again.", "Write a haiku about the sea.",
             "Explain what a hash table is.", "List the planets of the solar system.",
             "Count from one to twenty in words.", "What is the capital of France? Answer in one sentence.",
             "Give me a recipe for pancakes.", "Translate 'good morning' into French, Spanish and German.",
             "Write a Python function that reverses a string.", "Why is the sky blue?",
             "Describe a cat in five sentences.", "Repeat the word 'hello' ten times."]


def greedy_ids(exe, model, prompt, n, tmp, *extra):
    out = tmp / "ids.json"
    p = run([exe, "run", "-m", model, "--device", DEVICE, "-p", prompt, "-n", n, "--temp", 0, "--ids-out", out,
             *extra])
    ids = json.loads(out.read_text())["ids"]
    m = re.search(r"(\d+) drafted, (\d+) accepted", p.stderr)
    return ids, (int(m.group(1)), int(m.group(2))) if m else None


def spec(head, k=3):
    return ["--spec", f"head:{head}", "--num-speculative-tokens", k, "--no-adaptive-speculation"]


def simulated_drafts(out, k, draft_at):
    """(drafted, accepted) of a drafter proposing draft_at(j) k times after
    position j of the output, verified greedily (never past the last token)."""
    drafted = accepted = 0
    j = 0
    while j + 1 < len(out):
        n = min(k, len(out) - j - 2)
        if n <= 0:
            break
        a = 0
        while a < n and out[j + 1 + a] == draft_at(j):
            a += 1
        drafted, accepted, j = drafted + n, accepted + a, j + a + 1
    return drafted, accepted


def pass_through_head(shape):
    t = random_head(shape, seed=7, ffn=64)
    d = shape["dim"]
    fc = np.zeros((d, 2 * d), np.float32)
    fc[np.arange(d), d + np.arange(d)] = 1.0
    t["fc.weight"] = fc
    t["blk.0.attn_output.weight"][:] = 0.0
    t["blk.0.ffn_down.weight"][:] = 0.0
    return t


def check_random_head(exe, model, head, tmp):
    prompt = CHAT.format(QUESTIONS[0])
    plain, _ = greedy_ids(exe, model, prompt, 48, tmp)
    for name, extra in (("graphs", []), ("host launches", ["--enforce-eager"])):
        got, stats = greedy_ids(exe, model, prompt, 48, tmp, *spec(head), *extra)
        record(f"random head, greedy == plain ({name})", got == plain and stats is not None and stats[0] > 0,
               drafted=stats and stats[0], accepted=stats and stats[1])


def check_pass_through(exe, model, head, tmp):
    plain, _ = greedy_ids(exe, model, DIGITS, 40, tmp)
    got, stats = greedy_ids(exe, model, DIGITS, 40, tmp, *spec(head))
    answer = plain  # the generated ids
    want = simulated_drafts(answer, 3, lambda j: answer[j])
    off_by_one = simulated_drafts(answer, 3, lambda j: answer[j - 1] if j > 0 else -1)
    record("pass-through head, greedy == plain", got == plain)
    record("pass-through head drafts the newest token (the right position's hidden state)",
           stats == want and want[1] > 0 and want != off_by_one, got=stats, want=want, off_by_one=off_by_one)


def check_batch(exe, model, head, tmp):
    reqs = [{"prompt": CHAT.format(q), "max_tokens": 64, "temperature": 0, "logprobs": 1, "ignore_eos": True}
            for q in QUESTIONS]
    results = {}
    for name, extra in (("plain", []), ("head", spec(head))):
        inp, out, st = tmp / f"{name}.jsonl", tmp / f"{name}-out.jsonl", tmp / f"{name}-stats.json"
        inp.write_text("".join(json.dumps(r) + "\n" for r in reqs))
        run([exe, "batch", "-m", model, "--device", DEVICE, "-i", inp, "-o", out, "--stats", st, *extra])
        rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        results[name] = ([[(c["token_ids"], c.get("logprobs")) for c in r["choices"]] for r in rows],
                         json.loads(st.read_text()))
    same = sum(a == b for a, b in zip(results["plain"][0], results["head"][0]))
    stats = results["head"][1]
    record(f"batch of {len(reqs)}, greedy tokens and logprobs == plain", same == len(reqs), same=same,
           drafted=stats.get("spec_drafted_tokens"), accepted=stats.get("spec_accepted_tokens"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exactly", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--head", help="a trained head: checked as the random one is, its acceptance reported")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json")
    a = ap.parse_args()
    global DEVICE
    DEVICE = a.device
    shape = target_shape(a.model)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        random_path, pass_path = tmp / "random.gguf", tmp / "pass.gguf"
        write_head(str(random_path), shape, random_head(shape, seed=5, ffn=128), matrix_type="F16")
        write_head(str(pass_path), shape, pass_through_head(shape))
        check_random_head(a.exactly, a.model, random_path, tmp)
        check_pass_through(a.exactly, a.model, pass_path, tmp)
        check_batch(a.exactly, a.model, random_path, tmp)
        if a.head:
            check_random_head(a.exactly, a.model, a.head, tmp)
            check_batch(a.exactly, a.model, a.head, tmp)
    return REPORT.finish("draft-head checks", a.json)


if __name__ == "__main__":
    sys.exit(main())
