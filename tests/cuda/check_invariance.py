"""Batch invariance of the engine, bit for bit: a request's tokens and
logprobs never depend on what else runs with it or on how its work is cut.

Target requests (greedy, seeded sampling with n = 2, prompts of 700 and
1,500 tokens) run alone, then compared with the same requests
1. among 127 others of mixed lengths (random token ids, 3 to 900 tokens), and
   the shorter targets among 15 others of 600-700 tokens (at head dim 64 on
   Hopper their decode rows then take the split path, alone the cluster);
2. with prefill chunks of 1, 7 and 64 tokens per step, and unlimited;
3. after their prompt's blocks were cached by an earlier copy (a prefix hit);
4. under a KV cache small enough that requests are preempted and recomputed;
5. with speculation (prompt lookup, greedy targets);
6. with every kernel launched eagerly (no CUDA graphs);
7. in a second process.
Then the sampler against the scorer: the logprob each of 64 generated texts
reported for its tokens equals, bit for bit, the logprob of the same token
when the text comes back as a prompt (prompt_logprobs, scored in chunks of 7).
Prompts are random token ids from a seeded generator, not text any other test
uses. Comparisons are exact: token ids and every logprob's bits (the batch
output prints floats so that they read back exactly).

    python3 tests/cuda/check_invariance.py --exactly BIN --model GGUF [--device cuda] [--flags "..."] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

from check_report import Report, run

REPORT = Report()
record = REPORT.record


def targets(vocab: int, rng: random.Random) -> list[dict]:
    def ids(n: int) -> list[int]:
        return [rng.randrange(100, vocab) for _ in range(n)]
    motif = ids(12)  # repeated, so that prompt lookup finds drafts
    return [
        {"prompt": motif * 3 + ids(1), "max_tokens": 24, "temperature": 0, "ignore_eos": True, "logprobs": 5},
        {"prompt": ids(181), "max_tokens": 24, "temperature": 0.9, "top_p": 0.95, "seed": 7, "n": 2,
         "ignore_eos": True, "logprobs": 3},
        {"prompt": ids(700), "max_tokens": 16, "temperature": 0, "ignore_eos": True, "logprobs": 2},
        # On Hopper a lone sequence's decode rows past 1,024 keys take the
        # split path at head dim 128 (at any under EXACTLY_EXACT_ROWS=split),
        # the same rows in the crowd the windows.
        {"prompt": ids(1500), "max_tokens": 12, "temperature": 0.8, "seed": 11, "ignore_eos": True, "logprobs": 2},
    ]


def fillers(vocab: int, rng: random.Random, count: int) -> list[dict]:
    out = []
    for i in range(count):
        n = rng.choice([3, 9, 30, 77, 150, 300, 600, 900])
        out.append({"prompt": [rng.randrange(100, vocab) for _ in range(n)], "max_tokens": rng.randrange(1, 40),
                    "ignore_eos": True, "temperature": rng.choice([0, 0.7, 1.2]), "seed": 1000 + i})
    return out


def peers(vocab: int, rng: random.Random, count: int) -> list[dict]:
    """Requests of 600-700 prompt tokens that decode beside the targets."""
    return [{"prompt": [rng.randrange(100, vocab) for _ in range(rng.choice([600, 650, 700]))], "max_tokens": 30,
             "ignore_eos": True, "temperature": 0.7, "seed": 2000 + i} for i in range(count)]


def run_batch(exe: str, model: str, reqs: list[dict], extra: list[str], tmp: Path, name: str,
              stats: dict | None = None) -> list[dict]:
    inp, out, st = tmp / f"{name}.jsonl", tmp / f"{name}-out.jsonl", tmp / f"{name}-stats.json"
    inp.write_text("".join(json.dumps(r) + "\n" for r in reqs))
    run([exe, "batch", "-m", model, "-i", str(inp), "-o", str(out), "--stats", str(st), *extra])
    if stats is not None:
        stats.update(json.loads(st.read_text()))
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def essence(result: dict) -> list:
    """What must be identical: each choice's token ids and logprobs."""
    return [(c["token_ids"], c.get("logprobs")) for c in result["choices"]]


def compare(name: str, want: list[dict], got: list[dict]) -> None:
    same = [essence(a) == essence(b) for a, b in zip(want, got)]
    first = None
    for i, (a, b) in enumerate(zip(want, got)):
        if not same[i]:
            ta, tb = a["choices"][0]["token_ids"], b["choices"][0]["token_ids"]
            first = next((j for j in range(min(len(ta), len(tb))) if ta[j] != tb[j]), "logprobs only")
            break
    record(name, all(same) and len(want) == len(got), identical=f"{sum(same)}/{len(want)}", first_difference=first)


def check_sampler_against_scorer(a, base: list[str], vocab: int, rng: random.Random, tmp: Path) -> None:
    gen = []
    for i in range(44):  # 22 greedy, 22 sampled with n = 2: 66 texts
        prompt = [rng.randrange(100, vocab) for _ in range(rng.choice([5, 40, 200]))]
        sampled = {"temperature": 0.8, "seed": 500 + i, "n": 2} if i % 2 else {"temperature": 0}
        gen.append({"prompt": prompt, "max_tokens": 16, "ignore_eos": True, "logprobs": 1, **sampled})
    out = run_batch(a.exactly, a.model, gen, base, tmp, "sampler")
    texts, want = [], []
    for req, res in zip(gen, out):
        for choice in res["choices"]:
            texts.append({"prompt": req["prompt"] + choice["token_ids"], "max_tokens": 1, "prompt_logprobs": 1,
                          "temperature": 0})
            want.append((len(req["prompt"]), choice["token_ids"], choice["logprobs"]["token_logprobs"]))
    scored = run_batch(a.exactly, a.model, texts, base + ["--max-num-batched-tokens", "7"], tmp, "scorer")
    same = total = 0
    for (n_prompt, ids, lps), res in zip(want, scored):
        for k, t in enumerate(ids):
            total += 1
            same += res["prompt_logprobs"][n_prompt + k][str(t)]["logprob"] == lps[k]
    record(f"sampler == scorer ({len(texts)} texts)", same == total and len(texts) >= 64, tokens=total, identical=same)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exactly", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--flags", default="", help="engine flags of every run, e.g. --no-deterministic")
    ap.add_argument("--fillers", type=int, default=127)
    ap.add_argument("--vocab", type=int, help="the model's vocabulary size (default: measured from its logits)")
    ap.add_argument("--small-kv", help="the KV cache of the preemption run, small enough to preempt this model "
                    "(default 40MiB on the GPU, 80MiB on the CPU: for the default model)")
    ap.add_argument("--json")
    a = ap.parse_args()
    base = ["--device", a.device, *a.flags.split()]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        vocab = a.vocab
        if vocab is None:
            ids = json.loads(run([a.exactly, "tokenize", "-m", a.model, "--json", "x"]).stdout)
            run([a.exactly, "logits", "-m", a.model, "--tokens", ",".join(map(str, ids)), "-o", str(tmp / "p.bin")])
            vocab = (tmp / "p.bin").stat().st_size // 4 // len(ids)
        rng = random.Random(20261203)
        tgt = targets(vocab, rng)
        alone = [run_batch(a.exactly, a.model, [t], base, tmp, f"alone-{i}")[0] for i, t in enumerate(tgt)]

        mixed = fillers(vocab, rng, a.fillers)
        order = list(range(len(mixed) + len(tgt)))
        rng.shuffle(order)
        reqs = (mixed + tgt)
        shuffled = [reqs[i] for i in order]
        out = run_batch(a.exactly, a.model, shuffled, base + ["--max-num-batched-tokens", "2048"], tmp, "crowd")
        crowd = [out[order.index(len(mixed) + i)] for i in range(len(tgt))]
        compare(f"among {a.fillers} others", alone, crowd)

        # The targets under 1,024 tokens with 15 peers: 19 sequences over
        # 600-716 keys, whose row groups' clusters do not fit on the SMs.
        short = [i for i, t in enumerate(tgt) if len(t["prompt"]) < 1024]
        near = [tgt[i] for i in short] + peers(vocab, rng, 15)
        out = run_batch(a.exactly, a.model, near, base, tmp, "peers")
        compare("among 15 others of 600-700 tokens", [alone[i] for i in short], out[:len(short)])

        for chunk in (1, 7, 64, 8192):
            # A budget of c tokens a step cuts each prompt into chunks of at most c.
            got = [run_batch(a.exactly, a.model, [t], base + ["--max-num-batched-tokens", str(chunk)], tmp,
                             f"chunk-{chunk}-{i}")[0] for i, t in enumerate(tgt)]
            compare(f"prefill chunks of {chunk}", alone, got)

        # The same request twice, the second arriving once the first has
        # finished: its prompt's full blocks come from the prefix cache.
        got = []
        later = 3.0 if a.device == "cuda" else 30.0
        for i, t in enumerate(tgt):
            pair = run_batch(a.exactly, a.model, [t, {**t, "arrival": later}], base, tmp, f"prefix-{i}")
            got.append(pair[1])
        compare("after a prefix-cache hit", alone, got)
        hits = [r.get("usage", {}).get("prompt_tokens_details", {}).get("cached_tokens", 0) for r in got]
        record("the prefix-cache runs did hit the cache", all(h > 0 for h in hits[:1] + hits[2:]), cached=hits)

        # About 1,800 tokens of the default model's KV (bf16 on the GPU, fp32
        # on the CPU): the longest target fits alone, the crowd does not.
        kv = a.small_kv or ("40MiB" if a.device == "cuda" else "80MiB")
        stats: dict = {}
        out = run_batch(a.exactly, a.model, shuffled, base + ["--kv-cache-memory", kv, "--max-num-seqs", "128"],
                        tmp, "preempted", stats)
        compare(f"with preemption ({kv} of KV cache)", alone,
                [out[order.index(len(mixed) + i)] for i in range(len(tgt))])
        record("the small cache did preempt", stats.get("preemptions", 0) > 0, preemptions=stats.get("preemptions"))

        greedy = [i for i, t in enumerate(tgt) if t.get("temperature") == 0]
        got, drafted = [], 0
        for i in greedy:
            stats = {}
            got += run_batch(a.exactly, a.model, [tgt[i]], base + ["--spec", "ngram", "--num-speculative-tokens", "4",
                                                                  "--no-adaptive-speculation"], tmp, f"spec-{i}", stats)
            drafted += stats.get("spec_drafted_tokens", 0)
        compare("with speculation (greedy)", [alone[i] for i in greedy], got)
        record("speculation did draft", drafted > 0, drafted=drafted)

        if a.device == "cuda":
            got = [run_batch(a.exactly, a.model, [t], base + ["--enforce-eager"], tmp, f"eager-{i}")[0]
                   for i, t in enumerate(tgt)]
            compare("without CUDA graphs", alone, got)

        got = [run_batch(a.exactly, a.model, [t], base, tmp, f"again-{i}")[0] for i, t in enumerate(tgt)]
        compare("in a second process", alone, got)

        check_sampler_against_scorer(a, base, vocab, rng, tmp)
    return REPORT.finish("invariance checks", a.json)


if __name__ == "__main__":
    sys.exit(main())
